# SPDX-License-Identifier: Apache-2.0
"""The PyTorch peer of bench/fmnist_vs_ddp.sh: the fmnist app's model (784-512-256-10, ReLU),
data (the same IDX files), global batch, SGD settings and per-worker shares, trained by one
process (WORLD 1) or by DistributedDataParallel over gloo (WORLD > 1), one thread per process.
Prints the median training throughput and, with a target, the time to reach it.
  python3 ddp_fmnist.py WORLD EPOCHS [TARGET_ACCURACY] [HIDDEN]"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"
BATCH, LR, MOMENTUM = 256, 0.05, 0.9


def load(split):
    with gzip.open(f"{DATA}/{split}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(f"{DATA}/{split}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def rank_main(rank, world, epochs, target, hidden, port, out):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    sizes = [784] + hidden + [10]
    layers = []
    for i in range(1, len(sizes)):
        layers.append(nn.Linear(sizes[i - 1], sizes[i]))
        if i < len(sizes) - 1:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = nn.CrossEntropyLoss()
    share = BATCH // world
    steps = len(train_y) // BATCH
    rates, start, reached = [], time.perf_counter(), None
    for epoch in range(epochs):
        order = torch.randperm(len(train_y), generator=torch.Generator().manual_seed(1000 + epoch))
        model.train()
        for s in range(steps):
            t0 = time.perf_counter()
            idx = order[s * BATCH + rank * share: s * BATCH + (rank + 1) * share]
            x = train_x[idx].float().div_(255.0)
            y = train_y[idx]
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()  # DDP averages: the global batch's mean gradient
            opt.step()
            rates.append(BATCH / (time.perf_counter() - t0))
        stop = torch.zeros(1)
        if rank == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(test_x.float().div_(255.0)).argmax(1) == test_y).float().mean().item()
            out.put(("epoch", epoch + 1, acc, time.perf_counter() - start))
            if target and acc >= target and reached is None:
                reached = time.perf_counter() - start
                stop[0] = 1
        if world > 1:
            dist.broadcast(stop, 0)
        if stop[0] > 0:
            break
    if rank == 0:
        rates.sort()
        out.put(("done", rates[len(rates) // 2], reached))
    if world > 1:
        dist.destroy_process_group()


def main():
    world, epochs = int(sys.argv[1]), int(sys.argv[2])
    target = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    hidden = [int(h) for h in (sys.argv[4] if len(sys.argv) > 4 else "512,256").split(",")]
    port = 29600 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, world, epochs, target, hidden, port, out))
             for r in range(world)]
    for p in procs:
        p.start()
    label = "pytorch" if world == 1 else "pytorch-ddp"
    while True:
        msg = out.get()
        if msg[0] == "epoch":
            print(f"{label} workers={world} epoch={msg[1]} test_accuracy={msg[2]:.4f} t={msg[3]:.1f}s",
                  flush=True)
        else:
            ttt = f"{msg[2]:.1f}" if msg[2] is not None else "none"
            print(f"train impl={label} workers={world} samples_per_s={msg[1]:.0f} "
                  f"time_to_target_s={ttt}", flush=True)
            break
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
