"""After `sync` on the H200: pointnet2_ops from the locked wheel against plain torch (run with the target's Python)."""

import torch
from pointnet2_ops import pointnet2_utils


def reference_fps(points: torch.Tensor, count: int) -> torch.Tensor:
    batch, size, _ = points.shape
    chosen = torch.zeros(batch, count, dtype=torch.long)
    distance = torch.full((batch, size), 1e10)
    farthest = torch.zeros(batch, dtype=torch.long)
    for i in range(count):
        chosen[:, i] = farthest
        centre = points[torch.arange(batch), farthest].unsqueeze(1)
        distance = torch.minimum(distance, ((points - centre) ** 2).sum(-1))
        farthest = distance.argmax(-1)
    return chosen


torch.manual_seed(0)
xyz = torch.rand(4, 2048, 3, device="cuda")
idx = pointnet2_utils.furthest_point_sample(xyz, 128)
same_fps = torch.equal(idx.long().cpu(), reference_fps(xyz.cpu(), 128))
features = torch.rand(4, 16, 2048, device="cuda")
gathered = pointnet2_utils.gather_operation(features, idx)
same_gather = torch.equal(
    gathered.cpu(),
    torch.gather(features.cpu(), 2, idx.long().cpu().unsqueeze(1).expand(-1, 16, -1)),
)
print(
    f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; pointnet2_ops from {pointnet2_utils.__file__}"
)
print(
    f"furthest_point_sample equals the reference: {same_fps}; gather_operation equals torch.gather: {same_gather}"
)
raise SystemExit(0 if same_fps and same_gather else 1)
