"""compare_report.html as an engineer sees it: rendered by headless Chromium (Debian's `chromium`),
the culprit's name must be on screen at the top, with its evidence, and the chart must name the
operators. Skipped when chromium is not installed."""
import json
import os
import re
import shutil
import subprocess

import pytest
import torch

from conftest import run
from test_accuracy import Faulty, model
from portkit.torch import dumper

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Appended to a copy of the report: records what the browser laid out, where a --dump-dom shows it.
PROBE = """<script>
window.addEventListener('load', function () {
  var el = document.getElementById('culprit-name');
  var r = el ? el.getBoundingClientRect() : null;
  var st = el ? getComputedStyle(el) : null;
  var labels = Array.prototype.map.call(document.querySelectorAll('#chart text.op-label'),
                                        function (t) { return t.textContent; });
  var culpritLabel = document.querySelector('#chart text.culprit-label');
  document.body.setAttribute('data-probe', JSON.stringify({
    text: el ? el.textContent : null,
    top: r ? r.top : null, width: r ? r.width : null, height: r ? r.height : null,
    visible: st ? (st.display !== 'none' && st.visibility !== 'hidden' && st.opacity !== '0') : false,
    labels: labels, culpritLabel: culpritLabel ? culpritLabel.textContent : null,
    evidence: document.querySelectorAll('#culprit table tr').length
  }));
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")
def test_the_culprit_is_visible_at_the_top_of_the_rendered_report(tmp_path, portkit):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with dumper(dump_path=str(tmp_path / "ref")):
        model()(x).sum().backward()
    with Faulty():  # a wrong tanh kernel
        with dumper(dump_path=str(tmp_path / "tgt"), load_file_path=str(tmp_path / "ref"), use_load=True):
            model()(x).sum().backward()
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "cmp" / "compare_result.json").read_text())
    assert report["first_divergence"]["name"] == "aten::tanh"
    html = (tmp_path / "cmp" / "compare_report.html").read_text()
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r'data-probe="([^"]*)"', out.stdout)
    assert m, out.stdout[-2000:] + out.stderr[-2000:]
    probe = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                       .replace("&gt;", ">"))
    assert probe["text"] == "aten::tanh" and probe["visible"]
    assert probe["width"] > 0 and probe["height"] > 0
    assert 0 <= probe["top"] < 300  # in the first screen, above everything else
    assert probe["evidence"] >= 4  # header, the input, the live output and the replayed output
    assert probe["culpritLabel"].startswith("culprit: aten::tanh")
    assert any(label.startswith("aten::tanh") for label in probe["labels"])
    assert len(probe["labels"]) >= 5 and any(label.startswith("aten::convolution") for label in probe["labels"])
    for role in ("replayed output", "live output", "input"):
        assert role in html
