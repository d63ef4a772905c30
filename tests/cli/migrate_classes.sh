#!/usr/bin/env bash
# The edit classes of a port as Ascend's engineers make them (tests/fixtures/migrate/classes), each
# with hits and non-hits: torch.cuda.amp → the target's autocast/GradScaler, backends, set_device
# with the local rank, pin_memory/non_blocking, env vars in Python and in launch scripts, apex →
# plain torch (or a review row when unsure; FusedLAMB, which torch lacks, a review row naming the
# target's fused optimizer; imports of apex's compiled CUDA extensions review rows), other runtimes left alone, no-op edits dropped; the
# --dry-run summary per class; the same fixture through a target made of a target.json alone.
source "$(dirname "$0")/harness.sh"

fixture=tests/fixtures/migrate/classes
golden=tests/golden/migrate_classes
"$PORTKIT" migrate -i "$fixture" -o "$tmp/out" --format csv,json >"$tmp/out.log" 2>&1; rc=$?
copy="$tmp/out/classes_msft"
reports="$tmp/out/classes_msft_report"  # migrate's reports sit beside the copy
check "migrate of the classes fixture exits 0" "[ $rc = 0 ]"
if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
  mkdir -p "$golden" && cp "$reports/change_list.csv" "$reports/migration.patch" "$golden/"
fi
check "change_list.csv matches the golden copy" "diff -u '$golden/change_list.csv' '$reports/change_list.csv'"
check "migration.patch matches the golden copy" "diff -u '$golden/migration.patch' '$reports/migration.patch'"
check "every migrated file compiles with python3" "python3 -c '
import pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).rglob(\"*.py\")):
    compile(p.read_bytes(), str(p), \"exec\", dont_inherit=True)
' '$copy'"

# amp
check "amp: torch.cuda.amp forms become torch.npu.amp in code, torch_npu.npu.amp in imports" "grep -q 'scaler = torch.npu.amp.GradScaler()' '$copy/amp_train.py' && grep -q 'with torch.npu.amp.autocast():' '$copy/amp_train.py' && grep -q '^from torch_npu.npu.amp import GradScaler, autocast$' '$copy/amp_train.py'"
check "amp: CPU autocast is left alone" "grep -q 'with torch.autocast(\"cpu\"):' '$copy/amp_train.py' && grep -q 'with torch.cpu.amp.autocast():' '$copy/amp_train.py'"
check "amp: names a rewritten import binds keep their calls (the import carries the change)" "grep -qx 'scaler2 = GradScaler(init_scale=1024)' '$copy/amp_train.py' && grep -qx '    with autocast(dtype=torch.float16):' '$copy/amp_train.py' && ! grep -q 'torch_npu.npu.amp.GradScaler(' '$copy/amp_train.py'"
check "amp: a call through a name bound by assignment is left, the assigned value rewritten" "grep -qx '    amp_autocast = torch.npu.amp.autocast' '$copy/amp_train.py' && grep -qx '    with amp_autocast():' '$copy/amp_train.py' && grep -qx 'if torch.npu.is_available():' '$copy/amp_train.py'"
check "aliases: names bound by assignment keep their calls, an import alias is rewritten" "grep -qx '        self.backend = torch.npu' '$copy/aliases.py' && grep -qx '        self.backend.synchronize()' '$copy/aliases.py' && grep -qx 'dev = torch.npu' '$copy/aliases.py' && grep -qx 'dev.synchronize()' '$copy/aliases.py' && grep -qx '        torch_npu.npu.synchronize()' '$copy/aliases.py'"
# distributed, set_device, local rank, pinned memory
check "dist: nccl → hccl, gloo kept" "grep -q 'init_process_group(backend=\"hccl\"' '$copy/dist_train.py' && grep -q 'new_group(backend=\"gloo\")' '$copy/dist_train.py'"
check "dist: set_device and the device of the local rank" "grep -q 'torch.npu.set_device(args.local_rank)' '$copy/dist_train.py' && grep -q 'torch.device(\"npu\", args.local_rank)' '$copy/dist_train.py'"
check "data: pin_memory gets the device, non_blocking kept, a plain loader untouched" "grep -q 'pin_memory=True, num_workers=2, pin_memory_device=\"npu\")' '$copy/dist_train.py' && grep -q 'batch.npu(non_blocking=True)' '$copy/dist_train.py' && grep -q 'plain = DataLoader(dataset, batch_size=8)  #' '$copy/dist_train.py'"
check "no edit for .to(other_tensor)" "! grep -q 'dist_train.py,2[78],' '$reports/change_list.csv' && grep -q 'z = batch.to(reference)' '$copy/dist_train.py'"
check "env var in Python renamed" "grep -q 'setdefault(\"ASCEND_RT_VISIBLE_DEVICES\"' '$copy/dist_train.py'"
# launch scripts
check "launch script: export, prefix assignment and expansion renamed" "grep -qx 'export ASCEND_RT_VISIBLE_DEVICES=0,1' '$copy/run_train.sh' && grep -q '^ASCEND_RT_VISIBLE_DEVICES=0 python' '$copy/run_train.sh' && grep -qF '\${ASCEND_RT_VISIBLE_DEVICES}' '$copy/run_train.sh'"
check "launch script: comments and longer names untouched" "grep -q '^# Launch on two devices. CUDA_VISIBLE_DEVICES in a comment' '$copy/run_train.sh' && grep -q '^MY_CUDA_VISIBLE_DEVICES_NOTE=unchanged' '$copy/run_train.sh'"
# apex
check "apex: FusedLayerNorm imported as torch.nn.LayerNorm" "grep -qx 'from torch.nn import LayerNorm as FusedLayerNorm' '$copy/apex_model.py'"
check "apex: FusedLAMB (no plain torch counterpart) kept, its call a review row naming the target's fused optimizer" "grep -qx 'from apex.optimizers import FusedLAMB' '$copy/apex_parallel.py' && grep -q 'apex_parallel.py,9,9,Review,\"apex.optimizers.FusedLAMB not ported: torch has no equivalent; the target.s is torch_npu.optim.NpuFusedLamb (--unsafe makes it' '$reports/change_list.csv'"
check "apex: apex's DDP becomes torch's where no apex-only keyword is used, else a review row" "grep -qx 'from torch.nn.parallel import DistributedDataParallel as DDP' '$copy/apex_parallel.py' && grep -qx 'from apex.parallel import DistributedDataParallel' '$copy/apex_ddp_bucket.py' && grep -q 'apex_ddp_bucket.py,6,6,Review,apex.parallel.DistributedDataParallel → torch.nn.parallel.DistributedDataParallel not made: keyword message_size' '$reports/change_list.csv'"
check "apex: imports of compiled CUDA extensions are review rows, other imports are not" "[ \"\$(grep -c '^classes/apex_ext.py,.*,Review,' '$reports/change_list.csv')\" = 3 ] && grep -q 'apex_ext.py,2,2,Review,amp_C: a compiled CUDA extension' '$reports/change_list.csv' && cmp -s '$fixture/apex_ext.py' '$copy/apex_ext.py'"
check "apex: FusedAdam(adam_w_mode=False) kept and listed for review" "grep -qx 'from apex.optimizers import FusedAdam' '$copy/apex_model.py' && grep -q 'apex_model.py,18,18,Review,apex.optimizers.FusedAdam → torch.optim.AdamW not made: keyword adam_w_mode has no counterpart in torch.optim.AdamW; port it by hand' '$reports/change_list.csv' && grep -q 'apex_model.py,4,4,Review,\"from apex.optimizers import FusedAdam: kept; a call needs review' '$reports/change_list.csv'"
# fused optimizers: review rows by default, the swap with --unsafe
check "optim: torch.optim.SGD/Adam listed for review, nothing changed" "cmp -s '$fixture/optim_train.py' '$copy/optim_train.py' && grep -q '^classes/optim_train.py,13,13,Review,\"torch.optim.SGD → torch_npu.optim.NpuFusedSGD not made: ' '$reports/change_list.csv' && grep -q '^classes/optim_train.py,15,15,Review,\"torch.optim.Adam → torch_npu.optim.NpuFusedAdam not made: ' '$reports/change_list.csv' && [ \$(grep -c '^classes/optim_train.py,' '$reports/change_list.csv') = 2 ]"
"$PORTKIT" migrate -i "$fixture" -o "$tmp/unsafe" --unsafe >/dev/null 2>&1; rc=$?
check "optim: --unsafe makes the swap; the project's own SGD and Adagrad are left" "[ $rc = 0 ] && grep -qx '        return torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)' '$tmp/unsafe/classes_msft/optim_train.py' && grep -qx '        return torch_npu.optim.NpuFusedAdam(model.parameters(), lr=1e-3)' '$tmp/unsafe/classes_msft/optim_train.py' && grep -qx '        return SGD(model.parameters())' '$tmp/unsafe/classes_msft/optim_train.py' && grep -q 'return torch.optim.Adagrad(model.parameters())' '$tmp/unsafe/classes_msft/optim_train.py' && ! grep -q 'optim_train.py,.*Review' '$tmp/unsafe/classes_msft_report/change_list.csv'"
check "optim: optimizer classes referenced without a call (a table, an assignment) are review rows; type tests, subclasses and unfused ones are not" "cmp -s '$fixture/optim_table.py' '$copy/optim_table.py' && grep -q '^classes/optim_table.py,6,6,Review,\"torch.optim.SGD → torch_npu.optim.NpuFusedSGD not made: referenced, not called' '$reports/change_list.csv' && grep -q '^classes/optim_table.py,6,6,Review,\"torch.optim.Adam → ' '$reports/change_list.csv' && grep -q '^classes/optim_table.py,7,7,Review,\"torch.optim.AdamW → torch_npu.optim.NpuFusedAdamW' '$reports/change_list.csv' && [ \$(grep -c '^classes/optim_table.py,' '$reports/change_list.csv') = 3 ]"
check "optim: --unsafe swaps the referenced classes too" "grep -qF 'OPTIMIZERS = {\"sgd\": torch_npu.optim.NpuFusedSGD, \"adam\": torch_npu.optim.NpuFusedAdam, \"adagrad\": torch.optim.Adagrad}' '$tmp/unsafe/classes_msft/optim_table.py' && grep -qx 'optimizer_cls = torch_npu.optim.NpuFusedAdamW' '$tmp/unsafe/classes_msft/optim_table.py' && grep -qx '    return optimizer_cls(model.parameters())' '$tmp/unsafe/classes_msft/optim_table.py' && grep -qx 'class Scaled(torch.optim.SGD):  # a subclass: left' '$tmp/unsafe/classes_msft/optim_table.py' && grep -qF 'isinstance(opt, torch.optim.SGD)' '$tmp/unsafe/classes_msft/optim_table.py'"
# DDP: broadcast_buffers=False
check "ddp: torch's DDP gets broadcast_buffers=False" "grep -qxF '    a = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], broadcast_buffers=False)' '$copy/ddp_buffers.py' && grep -qxF '    b = NativeDDP(model, device_ids=[local_rank], output_device=local_rank, broadcast_buffers=False)' '$copy/ddp_buffers.py' && grep -q '^classes/ddp_buffers.py,7,7,ArgsModify,added broadcast_buffers=False to ' '$reports/change_list.csv' && grep -q '^classes/ddp_buffers.py,8,8,ArgsModify,added broadcast_buffers=False to torch.nn.parallel.DistributedDataParallel()' '$reports/change_list.csv'"
check "ddp: given (by keyword or position), **kwargs and DataParallel are left" "[ \$(grep -c ', broadcast_buffers=False)' '$copy/ddp_buffers.py') = 2 ] && grep -qxF '    c = NativeDDP(model, device_ids=[local_rank], broadcast_buffers=True)  # given: kept' '$copy/ddp_buffers.py' && grep -qxF '    d = NativeDDP(model, [local_rank], local_rank, 0, True)  # given positionally: kept' '$copy/ddp_buffers.py' && grep -qxF '    e = NativeDDP(model, **extra)  # may hold it: kept' '$copy/ddp_buffers.py'"
# apex convert_syncbn_model: kept, listed
check "syncbn: apex convert_syncbn_model kept, its import and calls review rows naming torch's" "cmp -s '$fixture/syncbn.py' '$copy/syncbn.py' && [ \$(grep -c '^classes/syncbn.py,.*,Review,' '$reports/change_list.csv') = 3 ] && grep -q '^classes/syncbn.py,8,8,Review,apex.parallel.convert_syncbn_model kept: ports keep it under Ascend.s apex (ModelZoo-PyTorch: 33 of 33 calls); torch.s equivalent is torch.nn.SyncBatchNorm.convert_sync_batchnorm (check' '$reports/change_list.csv' && grep -q '^classes/syncbn.py,10,10,Review,.*keyword channel_last has no counterpart there' '$reports/change_list.csv' && grep -q '^classes/syncbn.py,4,4,Review,\"from apex.parallel import convert_syncbn_model: kept; what it imports stays the library.s' '$reports/change_list.csv'"
# other runtimes
check "other runtimes: ORT, TensorRT and cupy arguments untouched, torch beside them migrated" "grep -q 'ortvalue_from_numpy(arr, \"cuda\", 0)' '$copy/other_runtimes.py' && grep -q 'providers=\[\"CUDAExecutionProvider\"\]' '$copy/other_runtimes.py' && grep -q 'cupy.cuda.Device(0)' '$copy/other_runtimes.py' && grep -q 'torch.zeros(4).to(\"npu:0\")' '$copy/other_runtimes.py'"

# --dry-run: the summary per class, and nothing written.
"$PORTKIT" migrate -i "$fixture" -o "$tmp/dry" --dry-run >"$tmp/dry.out" 2>"$tmp/dry.err"; rc=$?
check "--dry-run exits 0 and creates nothing" "[ $rc = 0 ] && [ ! -e '$tmp/dry' ]"
count() { grep -E "^\| +$1 +\|" "$tmp/dry.out" | tr -s ' |' ' ' | cut -d' ' -f3; }
csv_count() { python3 -c 'import json,sys; print(sum(1 for c in json.load(open(sys.argv[1]))["changes"] if c["class"] == sys.argv[2]))' "$reports/change_list.json" "$1"; }
check "--dry-run counts per class equal the real run's" "for c in amp device_api device_string distributed_backend env_var launch_script arguments cuda_library import; do [ \"\$(count \$c)\" = \"\$(csv_count \$c)\" ] || { echo \"class \$c: \$(count \$c) vs \$(csv_count \$c)\"; exit 1; }; done"
check "--dry-run lists the review rows" "grep -qE 'review \(not made\) +\| +17 +\| +7 +\|' '$tmp/dry.out' && grep -q '^review: classes/apex_model.py:18: apex.optimizers.FusedAdam' '$tmp/dry.out' && grep -q '^review: classes/syncbn.py:8: apex.parallel.convert_syncbn_model kept' '$tmp/dry.out' && grep -q '^review: classes/optim_table.py:6: torch.optim.SGD → torch_npu.optim.NpuFusedSGD not made: referenced, not called' '$tmp/dry.out'"
check "--dry-run counts DDP's broadcast_buffers additions with the argument edits" "grep -qE '^\| +arguments +\| +3 +\| +2 +\|' '$tmp/dry.out'"

# The same fixture through a target made of a target.json alone (device tdev): no npu code.
# (aliases.py keeps `dev = torch.cuda`: tdev's data renames no module object, so the calls through
# `dev` are rewritten instead, checked below.)
PORTKIT_DATA_DIR=tests/fixtures/targets/only_json "$PORTKIT" migrate -i "$fixture" -o "$tmp/tdev" --target tdev >/dev/null 2>&1; rc=$?
t="$tmp/tdev/classes_msft"
check "tdev: amp goes to <device_module>.amp, env vars to its names, no npu anywhere" "[ $rc = 0 ] && grep -q 'torch.tdev.amp.GradScaler()' '$t/amp_train.py' && grep -qx 'export TDEV_VISIBLE_DEVICES=0,1' '$t/run_train.sh' && ! grep -rqi npu '$t' --include=*.py --include=*.sh && ! grep -rq 'torch\\.cuda' '$t' --include=*.py --exclude=aliases.py"
check "tdev: calls through a name bound to torch.cuda are rewritten when the target renames no module" "grep -qx 'dev = torch.cuda' '$t/aliases.py' && grep -qx 'torch.tdev.synchronize()' '$t/aliases.py'"
echo "migrate_classes: $pass passed, $fail failed"
[ $fail = 0 ]
