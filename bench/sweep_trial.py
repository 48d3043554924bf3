# SPDX-License-Identifier: Apache-2.0
"""One trial of bench/sweep_vs_optuna.py: a PyTorch MLP on Fashion-MNIST (the IDX files of
dataset-fashion-mnist), one thread, SGD with momentum, for EPOCHS epochs; after each epoch
one line `MONKEY_METRIC step=EPOCH acc=TEST_ACCURACY` on stdout (what a Monkey sweep reads,
and what the Optuna driver parses the same way). Parameters as arguments, so that both
drivers run exactly the same command:
  python3 sweep_trial.py LR MOMENTUM HIDDEN BATCH EPOCHS SEED"""
import gzip
import signal
import sys

import numpy as np
import torch
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"


def load(split):
    with gzip.open(f"{DATA}/{split}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(f"{DATA}/{split}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return (torch.from_numpy(images.astype(np.float32) / 255.0),
            torch.from_numpy(labels.astype(np.int64)))


def main():
    lr, momentum = float(sys.argv[1]), float(sys.argv[2])
    hidden, batch = int(sys.argv[3]), int(sys.argv[4])
    epochs, seed = int(sys.argv[5]), int(sys.argv[6])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(train_y))
        model.train()
        for s in range(0, len(order) - batch + 1, batch):
            idx = order[s:s + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(test_x).argmax(1) == test_y).float().mean().item()
        if not np.isfinite(acc):
            acc = 0.0
        print(f"MONKEY_METRIC step={epoch} acc={acc:.6f}", flush=True)


if __name__ == "__main__":
    main()
