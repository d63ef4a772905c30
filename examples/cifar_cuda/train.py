"""Train ResNet-18 on CIFAR-10 (CUDA version)."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
import torchvision.transforms as T
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from models import ResNet18, Mish
from utils.misc import AverageMeter, feature_stats


def parse_args():
    parser = argparse.ArgumentParser(description="CIFAR-10 training")
    parser.add_argument("--data", default="./data")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=5e-2)
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--out", default="./checkpoints")
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    return parser.parse_args()


def build_loaders(args, distributed):
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    train_tf = T.Compose([
        T.RandomCrop(32, padding=4),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean, std),
    ])
    test_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    train_set = torchvision.datasets.CIFAR10(args.data, train=True, download=True, transform=train_tf)
    test_set = torchvision.datasets.CIFAR10(args.data, train=False, download=True, transform=test_tf)
    sampler = DistributedSampler(train_set) if distributed else None
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=(sampler is None),
                              sampler=sampler, num_workers=0)
    test_loader = DataLoader(test_set, batch_size=256, shuffle=False, num_workers=0)
    return train_loader, test_loader, sampler


def train_one_epoch(model, loader, criterion, optimizer, scaler, device, args):
    model.train()
    losses = AverageMeter()
    start = time.time()
    for step, (images, targets) in enumerate(loader):
        images = images.to(device)
        targets = targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.amp.autocast(enabled=args.amp):
            logits = model(images)
            loss = criterion(logits, targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        scaler.step(optimizer)
        scaler.update()
        losses.update(loss.item(), images.size(0))
        if step % 50 == 0:
            torch.cuda.synchronize()
            print(f"step {step} loss {losses.avg:.4f} {time.time() - start:.1f}s")
    return losses.avg


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct, total = 0, 0
    for images, targets in loader:
        images = images.to(device)
        targets = targets.to(device)
        logits = model(images)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        total += targets.numel()
    mean, var = feature_stats(logits)
    print(f"logit mean {mean.item():.3f} var {var.item():.3f}")
    return correct / max(total, 1)


def save_checkpoint(model, optimizer, scaler, epoch, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    state = model.module.state_dict() if isinstance(model, DistributedDataParallel) else model.state_dict()
    torch.save({
        "epoch": epoch,
        "model": state,
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    }, path)


def main():
    args = parse_args()
    distributed = int(os.environ.get("WORLD_SIZE", 1)) > 1
    if distributed:
        dist.init_process_group(backend="nccl")
        torch.cuda.set_device(args.local_rank)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if distributed:
        device = torch.device("cuda", args.local_rank)
    torch.backends.cudnn.benchmark = True

    train_loader, test_loader, sampler = build_loaders(args, distributed)
    model = ResNet18(num_classes=10, activation=Mish)
    model = model.cuda()
    if distributed:
        model = DistributedDataParallel(model, device_ids=[args.local_rank])

    criterion = nn.CrossEntropyLoss(label_smoothing=0.1).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)

    best = 0.0
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        loss = train_one_epoch(model, train_loader, criterion, optimizer, scaler, device, args)
        scheduler.step()
        acc = evaluate(model, test_loader, device)
        print(f"epoch {epoch}: loss {loss:.4f} acc {acc:.4f}")
        if (not distributed or dist.get_rank() == 0) and acc > best:
            best = acc
            save_checkpoint(model, optimizer, scaler, epoch, os.path.join(args.out, "best.pth"))

    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
