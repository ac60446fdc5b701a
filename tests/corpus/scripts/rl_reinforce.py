"""Policy-gradient RL (REINFORCE): a cart-pole environment simulated on the CPU with numpy, the policy network on
the device.  Every environment step sends the observation to the device, samples an action there and brings it
back with .item() to step the environment; the policy is updated once every ROLLOUT environment steps."""
import math

import numpy as np
import torch
from torch import nn

UPDATES = 8
ROLLOUT = 32
GAMMA = 0.99


class CartPole:
    """The classic cart-pole dynamics (Euler integration), in numpy."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state = None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                               theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc])
        done = abs(self.state[0]) > 2.4 or abs(self.state[2]) > 0.2095
        return self.state.astype(np.float32), 1.0, done


def discounted(rewards, dones):
    out, running = np.zeros(len(rewards), dtype=np.float32), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + GAMMA * running * (1.0 - dones[t])
        out[t] = running
    return out


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = nn.Sequential(nn.Linear(4, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 2)).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    env = CartPole(seed=0)
    obs = env.reset()
    episodes = 0
    for update in range(UPDATES):
        log_probs, rewards, dones = [], [], []
        for t in range(ROLLOUT):
            obs_t = torch.as_tensor(obs, device=device).unsqueeze(0)
            logp = torch.log_softmax(policy(obs_t), dim=-1)
            action = torch.multinomial(logp.exp(), 1)
            a = action.item()
            obs, reward, done = env.step(a)
            log_probs.append(logp.gather(1, action).squeeze())
            rewards.append(reward)
            dones.append(float(done))
            if done:
                obs = env.reset()
                episodes += 1
        returns = torch.as_tensor(discounted(rewards, dones), device=device)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(torch.stack(log_probs) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"{UPDATES} updates, {UPDATES * ROLLOUT} environment steps, {episodes} episodes")


if __name__ == "__main__":
    main()
