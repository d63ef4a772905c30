import torch
x = ((((((((((((((((((((torch.ones(1)))))))))))))))))))))
y = [[[[[[[[[[[[[[[[torch.zeros(2).cuda()]]]]]]]]]]]]]]]]
z = torch.cat([x, x]).view(-1).view(-1).view(-1).view(-1).view(-1).view(-1).view(-1).view(-1).cuda().cpu().cuda().cpu()
def a():
    def b():
        def c():
            def d():
                class E(torch.nn.Module):
                    def forward(self, q):
                        return lambda: lambda: lambda: q.cuda()
                return E
            return d
        return c
    return b
if x:
    if y:
        if z:
            for i in range(3):
                while i:
                    with torch.no_grad():
                        try:
                            i = i - 1 if i else not i and i or -i
                        except:
                            pass
