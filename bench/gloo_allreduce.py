# SPDX-License-Identifier: Apache-2.0
"""The gloo peer of bench/allreduce_vs_mpi.sh: torch.distributed's all_reduce (float32, sum,
in place) over the gloo backend, the median of ITERS calls after two warm-ups, as algorithm
bandwidth. python3 gloo_allreduce.py WORLD ELEMENTS[,ELEMENTS...] ITERS"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, sizes, iters, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for n in sizes:
        t = torch.ones(n, dtype=torch.float32)
        times = []
        for i in range(iters + 2):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        times.sort()
        med = times[len(times) // 2]
        if rank == 0:
            print(f"allreduce transport=gloo ranks={world} bytes={n * 4} median_us={med * 1e6:.0f} "
                  f"algbw_GBps={n * 4 / med / 1e9:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2].split(",")]
    iters = int(sys.argv[3])
    port = 29500 + os.getpid() % 1000
    mp.spawn(rank_main, args=(world, sizes, iters, port), nprocs=world, join=True)
