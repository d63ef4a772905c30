// Rule: affinity_function_template (Api Type `function`)
// What it finds: functions of the project whose name and exact parameter list match a function
//   template of the target's affinity data (data/targets/<target>/affinity.json "function"),
//   reported where they are defined and called.
// Why it matters: the target provides a fused implementation of the same function.
// Example: a project function `def fast_gelu(x):` matching a template named fast_gelu.
// Use instead: the Affinity Api Name of the row.
// Rule: affinity_class_template (Api Type `class`)
// What it finds: classes of the project whose name, base class, __init__ and forward parameters
//   match a class template of the target's affinity data (data/targets/<target>/affinity.json
//   "class").
// Why it matters: the target provides a fused module for the same computation.
// Example: a project `class LabelSmoothingCrossEntropy(nn.Module)` matching a template.
// Use instead: the Affinity Api Name of the row.
//
// The templates are matched by src/analyse/affinity.cc (MatchAffinityTemplates); this file only
// documents their two rules (the table of `portkit analyse --explain` is built from rule files).
