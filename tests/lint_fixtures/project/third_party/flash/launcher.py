import torch


def launch(kernel):
    kernel(stream=torch.cuda.current_stream())
