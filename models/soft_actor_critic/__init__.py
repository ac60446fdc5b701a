"""soft_actor_critic: Soft Actor-Critic (Haarnoja et al., 2018) with twin Q
critics, target critics, a tanh-squashed Gaussian actor and a learned
entropy temperature, on a pendulum swing-up environment written in numpy.

Each training step first runs the actor in the environment for a few steps
(one observation -> device, one action -> host per step: the host-side loop
that leaves an accelerator idle), stores the transitions in a numpy replay
buffer, samples a batch from it, copies it to the device, and updates critics,
actor and temperature, then moves the target critics towards the critics
parameter by parameter.  Eval: the deterministic policy on a batch of stored
observations plus a short greedy rollout.  Train and eval batch 256.
--small: hidden width 64 instead of 256."""
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from runner.model import BenchmarkModel
from runner.tasks import REINFORCEMENT_LEARNING

OBS_DIM = 3
ACT_DIM = 1
ENV_STEPS_PER_UPDATE = 8
PREFILL_TRANSITIONS = 1024
BUFFER_CAPACITY = 100_000
GAMMA = 0.99
TAU = 0.005
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class Pendulum:
	"""Frictionless pendulum swing-up: state (angle, angular velocity), torque
	in [-2, 2], reward -(angle^2 + 0.1 velocity^2 + 0.001 torque^2), 200 steps
	per episode, angle 0 upright."""
	MAX_SPEED, MAX_TORQUE, DT, G, MASS, LENGTH = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0
	EPISODE_STEPS = 200

	def __init__(self, seed):
		self.rng = np.random.RandomState(seed)
		self.reset()

	def reset(self):
		self.angle = self.rng.uniform(-math.pi, math.pi)
		self.velocity = self.rng.uniform(-1.0, 1.0)
		self.steps = 0
		return self.observation()

	def observation(self):
		return np.array([math.cos(self.angle), math.sin(self.angle), self.velocity], dtype=np.float32)

	def step(self, torque):
		torque = float(np.clip(torque, -self.MAX_TORQUE, self.MAX_TORQUE))
		wrapped = ((self.angle + math.pi) % (2 * math.pi)) - math.pi
		reward = -(wrapped ** 2 + 0.1 * self.velocity ** 2 + 0.001 * torque ** 2)
		acceleration = (3 * self.G / (2 * self.LENGTH) * math.sin(self.angle)
			+ 3.0 / (self.MASS * self.LENGTH ** 2) * torque)
		self.velocity = float(np.clip(self.velocity + acceleration * self.DT, -self.MAX_SPEED, self.MAX_SPEED))
		self.angle += self.velocity * self.DT
		self.steps += 1
		done = self.steps >= self.EPISODE_STEPS
		return self.observation(), reward, done


class ReplayBuffer:
	def __init__(self, capacity, seed):
		self.obs = np.zeros((capacity, OBS_DIM), np.float32)
		self.action = np.zeros((capacity, ACT_DIM), np.float32)
		self.reward = np.zeros((capacity, 1), np.float32)
		self.next_obs = np.zeros((capacity, OBS_DIM), np.float32)
		self.done = np.zeros((capacity, 1), np.float32)
		self.capacity, self.size, self.head = capacity, 0, 0
		self.rng = np.random.RandomState(seed)

	def add(self, obs, action, reward, next_obs, done):
		i = self.head
		self.obs[i], self.action[i], self.reward[i], self.next_obs[i], self.done[i] = obs, action, reward, next_obs, done
		self.head = (self.head + 1) % self.capacity
		self.size = min(self.size + 1, self.capacity)

	def sample(self, batch):
		picks = self.rng.randint(0, self.size, size=batch)
		return self.obs[picks], self.action[picks], self.reward[picks], self.next_obs[picks], self.done[picks]


def mlp(in_features, hidden, out_features):
	return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
		nn.Linear(hidden, out_features))


class Actor(nn.Module):
	def __init__(self, hidden):
		super().__init__()
		self.net = mlp(OBS_DIM, hidden, 2 * ACT_DIM)
		self.action_scale = Pendulum.MAX_TORQUE

	def forward(self, obs, deterministic=False):
		mean, log_std = self.net(obs).chunk(2, dim=-1)
		log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
		if deterministic:
			return torch.tanh(mean) * self.action_scale, None
		std = log_std.exp()
		noise = torch.randn_like(mean)
		pre_tanh = mean + std * noise
		squashed = torch.tanh(pre_tanh)
		# Gaussian log-density minus the tanh change of variables.
		log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
		log_prob = log_prob - torch.log(self.action_scale * (1 - squashed.pow(2)) + 1e-6).sum(-1, keepdim=True)
		return squashed * self.action_scale, log_prob


class TwinCritic(nn.Module):
	def __init__(self, hidden):
		super().__init__()
		self.q1 = mlp(OBS_DIM + ACT_DIM, hidden, 1)
		self.q2 = mlp(OBS_DIM + ACT_DIM, hidden, 1)

	def forward(self, obs, action):
		joint = torch.cat([obs, action], dim=-1)
		return self.q1(joint), self.q2(joint)


class Model(BenchmarkModel):
	task = REINFORCEMENT_LEARNING.OTHER_RL
	DESCRIPTION = "Soft Actor-Critic, numpy pendulum env loop on the host"
	DEFAULT_TRAIN_BSIZE = 256
	DEFAULT_EVAL_BSIZE = 256
	# The environment feeds float32 observations; half weights are left to amp.
	SUPPORTED_PRECISIONS = ("fp32", "tf32", "amp")

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		hidden = 64 if self.small else 256
		self.actor = Actor(hidden).to(self.device)
		self.critic = TwinCritic(hidden).to(self.device)
		self.target_critic = TwinCritic(hidden).to(self.device)
		self.target_critic.load_state_dict(self.critic.state_dict())
		self.target_critic.requires_grad_(False)
		self.log_alpha = torch.zeros(1, device=self.device, requires_grad=True)
		self.target_entropy = -float(ACT_DIM)
		self.env = Pendulum(self.seed)
		self.obs = self.env.reset()
		self.buffer = ReplayBuffer(BUFFER_CAPACITY, self.seed + 1)
		for _ in range(PREFILL_TRANSITIONS):
			action = self.env.rng.uniform(-Pendulum.MAX_TORQUE, Pendulum.MAX_TORQUE, size=ACT_DIM).astype(np.float32)
			self._env_step(action)
		self.model = self.actor
		self.example_inputs = (torch.from_numpy(self.buffer.sample(self.batch_size)[0]).to(self.device),)
		if test == "train":
			self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
			self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
			self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=3e-4)

	def modules_to_cast(self):
		return [self.actor, self.critic, self.target_critic]

	def _post_init(self):
		super()._post_init()
		self.critic.train(self.test == "train")

	def apply_backend(self):
		# The update uses actor and critics directly, not self.model alone.
		self.actor = torch.compile(self.actor, backend="inductor")
		self.critic = torch.compile(self.critic, backend="inductor")
		self.target_critic = torch.compile(self.target_critic, backend="inductor")
		self.model = self.actor

	def _env_step(self, action):
		next_obs, reward, done = self.env.step(action[0])
		self.buffer.add(self.obs, action, reward, next_obs, float(done))
		self.obs = self.env.reset() if done else next_obs
		return reward

	def _act(self, deterministic):
		obs = torch.from_numpy(self.obs).to(self.device).unsqueeze(0)
		with torch.no_grad():
			action, _ = self.actor(obs, deterministic=deterministic)
		return action.squeeze(0).float().cpu().numpy()

	def _batch(self):
		return [torch.from_numpy(array).to(self.device) for array in self.buffer.sample(self.batch_size)]

	def train(self):
		for _ in range(ENV_STEPS_PER_UPDATE):
			self._env_step(self._act(deterministic=False))
		obs, action, reward, next_obs, done = self._batch()
		alpha = self.log_alpha.exp().detach()

		with self.autocast():
			with torch.no_grad():
				next_action, next_log_prob = self.actor(next_obs)
				target_q1, target_q2 = self.target_critic(next_obs, next_action)
				target = reward + GAMMA * (1 - done) * (torch.min(target_q1, target_q2) - alpha * next_log_prob)
			q1, q2 = self.critic(obs, action)
			critic_loss = F.mse_loss(q1.float(), target.float()) + F.mse_loss(q2.float(), target.float())
		self.critic_optimizer.zero_grad(set_to_none=True)
		critic_loss.backward()
		self.critic_optimizer.step()

		with self.autocast():
			new_action, log_prob = self.actor(obs)
			new_q1, new_q2 = self.critic(obs, new_action)
			actor_loss = (alpha * log_prob.float() - torch.min(new_q1, new_q2).float()).mean()
		self.actor_optimizer.zero_grad(set_to_none=True)
		actor_loss.backward()
		self.actor_optimizer.step()

		alpha_loss = -(self.log_alpha * (log_prob.detach().float() + self.target_entropy)).mean()
		self.alpha_optimizer.zero_grad(set_to_none=True)
		alpha_loss.backward()
		self.alpha_optimizer.step()

		with torch.no_grad():
			for param, target_param in zip(self.critic.parameters(), self.target_critic.parameters()):
				target_param.mul_(1 - TAU).add_(param, alpha=TAU)
		return (critic_loss + actor_loss + alpha_loss).detach()

	def eval(self):
		rewards = [self._env_step(self._act(deterministic=True)) for _ in range(ENV_STEPS_PER_UPDATE)]
		with torch.no_grad(), self.autocast():
			actions, _ = self.actor(self.example_inputs[0], deterministic=True)
		return actions, torch.tensor(rewards, dtype=torch.float64)
