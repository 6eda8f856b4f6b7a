import torch


def report():
    print "devices:", torch.cuda.device_count()
