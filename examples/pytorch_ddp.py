"""A PyTorch DistributedDataParallel program (gloo on CPU), as PyTorchJob users write it.

`init_process_group` reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK,
which the Training Operator (and `kfdist launch`) inject. Rank 0 saves the
trained weights into `KFDIST_MODEL_DIR/model.pt`.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, args.steps + 1):
        x = torch.rand(32, 1) * 2 - 1
        loss = torch.nn.functional.mse_loss(model(x), 3 * x + 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 25 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(os.environ["KFDIST_MODEL_DIR"], "model.pt"))
        print(f"saved model.pt (world size {dist.get_world_size()})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
