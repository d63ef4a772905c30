from torch import *
from torch.nn import *
import torch.distributed as dist
__all__ = ["Outer", "make"]
__all__ += ["extra"]
x = torch.randn(3)
y = x.cuda
alias = torch.nn.functional


@torch.no_grad()
def make(*args, **kwargs):
    global x
    def inner(t, /, k=1, *, scale: float = 2.0):
        nonlocal args
        return lambda z=t: z.half() * scale
    x = [t.float() for t in args if t is not None]
    d = {k: v.cpu() for k, v in kwargs.items()}
    s = {t.numel() for t in x}
    g = (t.sum() for t in x)
    return inner, d, s, g, (w := x[0]) if x else None


class Outer(Module):
    class Inner(Linear):
        pass

    def forward(self, a):
        try:
            b = a.to("cuda:0", non_blocking=True)
        except (RuntimeError, ValueError) as e:
            raise e from None
        finally:
            dist.barrier()
        while a.dim() > 1:
            a = a.squeeze(0)
        match a.dim():
            case 0:
                return a
            case _:
                pass
        async def co():
            async with dist.new_group() as g:
                await g
        return b[..., 1:2, None] @ a.T
