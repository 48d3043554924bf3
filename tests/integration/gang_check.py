# SPDX-License-Identifier: Apache-2.0
"""One rank of a gang command job (test_apps.py): checks the variables torchrun would give,
then meets every other rank at MASTER_ADDR:MASTER_PORT (rank 0 listens; the others connect
and send their rank), reports a metric and exits. With torch installed it runs a tiny DDP
step over gloo instead of the hand-made rendezvous."""
import os
import socket
import sys
import time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
assert 0 <= local < local_world <= world, (local, local_world, world)
if local_world == world:  # every rank on this node
    assert local == rank, (local, rank)
    assert os.environ["GROUP_RANK"] == "0"
assert os.environ["MONKEY_RANK"] == str(rank)
assert os.environ["MONKEY_JOB_ID"]
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print(f"rank {rank} of {world}, master {addr}:{port}, local rank {local} of {local_world}, "
      f"group {os.environ['GROUP_RANK']}", flush=True)

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = None

if torch is not None and os.environ.get("GANG_NO_TORCH") != "1":
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    torch.manual_seed(rank)
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    w = model.module.weight.grad.clone()
    gathered = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(gathered, w)
    assert all(torch.allclose(g, w) for g in gathered), "DDP averaged the gradients"
    dist.destroy_process_group()
    print(f"MONKEY_METRIC step=1 met={world} torch=1", flush=True)
    if os.environ.get("GANG_LINGER_RANK") == str(rank):
        time.sleep(3)
    sys.exit(0)

if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(world)
    seen = {0}
    while len(seen) < world:
        conn, _ = srv.accept()
        seen.add(int(conn.recv(16).decode()))
        conn.close()
    met = len(seen)
else:
    for _ in range(300):
        try:
            s = socket.create_connection((addr, port), timeout=1)
            s.sendall(str(rank).encode())
            s.close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("could not reach rank 0")
    met = world
print(f"MONKEY_METRIC step=1 met={met} torch=0", flush=True)
if os.environ.get("GANG_LINGER_RANK") == str(rank):  # its part ends seconds after the others
    time.sleep(3)
if os.environ.get("GANG_FAIL_RANK") == str(rank):
    sys.exit(5)
if os.environ.get("GANG_FAIL_RANK"):
    time.sleep(60)
