"""Exercise kaolin's compiled ops through kaolin._C alone, on the GPU, against plain torch.

For a target where ``import kaolin`` cannot work because a runtime requirement could not be
installed (warp-lang and usd-core are larger than what reaches an air-gapped GPU machine here):
the extension module is loaded from the installed wheel by file, so kaolin/__init__.py is not run.

    python bench/kaolin_c_check.py   # with the target's interpreter
"""

from __future__ import annotations

import glob
import importlib.util
import os
import site
import sys

import torch

paths = [
    p
    for d in site.getsitepackages() + sys.path
    for p in glob.glob(os.path.join(d, "kaolin", "_C*.so"))
]
if not paths:
    raise SystemExit("kaolin/_C*.so not found on this interpreter's path")
spec = importlib.util.spec_from_file_location("kaolin._C", paths[0])
assert spec is not None and spec.loader is not None
_C = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_C)

torch.manual_seed(0)
p1 = torch.rand(2, 512, 3, device="cuda")
p2 = torch.rand(2, 768, 3, device="cuda")
dist, idx = _C.metrics.sided_distance_forward_cuda(p1.contiguous(), p2.contiguous())
torch.cuda.synchronize()
ref = torch.cdist(p1, p2).pow(2)
ref_min = ref.min(-1).values
err = (dist - ref_min).abs().max().item()
assert err < 1e-4, f"sided_distance differs from torch.cdist by {err}"
picked = ref.gather(-1, idx.long().unsqueeze(-1)).squeeze(-1)
assert (picked - ref_min).abs().max().item() < 1e-4, "sided_distance returned a non-nearest index"
print(
    f"kaolin._C ({paths[0]}) sided_distance_forward_cuda ok on {torch.cuda.get_device_name()} "
    f"(max error {err:.2e})"
)
