"""Dynamic-shape detector (`portkit analyse -m dynamic_shape`).

`portkit analyse -m dynamic_shape` copies this package next to the instrumented copy of a project
as `msft_dynamic_analysis/`, with `_config.py` saying where the project came from. Usage in a
training script::

    from msft_dynamic_analysis import DETECTOR
    for batch in DETECTOR.start(loader):
        ...

At exit (normal, exception, SIGTERM/SIGINT) and after every iteration in which something new was
seen, `msft_dynamic_shape_analysis_report.csv` is (re)written atomically.
"""
from .hook import DETECTOR, DynamicShapeDetector  # noqa: F401
