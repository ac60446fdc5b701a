"""A WGAN: the critic is trained N_CRITIC times per generator step, each with its own optimizer; a recurrent
noise state goes to the host and back every step; both losses are logged on one line."""
import torch
from torch import nn

N_CRITIC = 3
STEPS = 9
NOISE, DATA = 64, 96

torch.manual_seed(5)
dev = "cuda" if torch.cuda.is_available() else "cpu"
gen = nn.Sequential(nn.Linear(NOISE, 256), nn.ReLU(), nn.Linear(256, DATA)).to(dev)
critic = nn.Sequential(nn.Linear(DATA, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1)).to(dev)
opt_g = torch.optim.RMSprop(gen.parameters(), lr=5e-5)
opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
real_pool = torch.randn(STEPS * N_CRITIC, 64, DATA)
state = torch.zeros(64, NOISE, device=dev)
history = []


def critic_update(real):
    fake = gen(state + torch.randn(64, NOISE, device=dev)).detach()
    loss_c = critic(fake).mean() - critic(real).mean()
    opt_c.zero_grad()
    loss_c.backward()
    opt_c.step()
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
    return loss_c


for step in range(STEPS):
    for k in range(N_CRITIC):
        loss_c = critic_update(real_pool[step * N_CRITIC + k].to(dev))
    loss_g = -critic(gen(state)).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    state_host = (0.9 * state).cpu()  # the state goes to the host ...
    state = state_host.to(dev)  # ... and straight back, every step
    history.append((loss_g.item(), loss_c.item()))  # two syncs on one line
print("done", history[-1])
