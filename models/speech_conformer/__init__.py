"""speech_conformer: a Conformer-S-sized speech recognizer (Gulati et al.,
2020: 16 blocks, width 144, 4 heads, depthwise kernel 31) trained with CTC on
random audio.  The model includes its front end: STFT (25 ms Hann window,
10 ms hop at 16 kHz) -> power -> 80 triangular mel filters -> log, then a
2-layer stride-2 convolutional subsampling (4x fewer frames) before the
Conformer blocks (half-step feed-forward, self-attention, convolution module,
half-step feed-forward, layer norm) and a per-frame character classifier.
Random 2-second utterances with random 20-character transcripts.
Train and eval batch 8.  --small: 4 blocks of width 64 and 0.5 s of audio."""
import math

import torch
from torch import nn
import torch.nn.functional as F

from runner.model import BenchmarkModel
from runner.tasks import SPEECH

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
MEL_BINS = 80
VOCAB = 29            # blank + 26 letters + space + apostrophe
TRANSCRIPT_LENGTH = 20


def mel_filterbank(n_fft, n_mels, sample_rate):
	"""(n_fft//2+1, n_mels) triangular filters evenly spaced on the HTK mel scale."""
	def hz_to_mel(hz):
		return 2595.0 * math.log10(1.0 + hz / 700.0)
	top = hz_to_mel(sample_rate / 2)
	mel_points = torch.linspace(0.0, top, n_mels + 2, dtype=torch.float64)
	hz_points = 700.0 * (10.0 ** (mel_points / 2595.0) - 1.0)
	bin_hz = torch.linspace(0.0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
	lower, centre, upper = hz_points[:-2], hz_points[1:-1], hz_points[2:]
	rising = (bin_hz[:, None] - lower) / (centre - lower)
	falling = (upper - bin_hz[:, None]) / (upper - centre)
	return torch.clamp(torch.minimum(rising, falling), min=0.0).float()


class LogMel(nn.Module):
	def __init__(self):
		super().__init__()
		self.register_buffer("window", torch.hann_window(N_FFT), persistent=False)
		self.register_buffer("filters", mel_filterbank(N_FFT, MEL_BINS, SAMPLE_RATE), persistent=False)

	def forward(self, waveform):
		spectrum = torch.stft(waveform.float(), N_FFT, hop_length=HOP, window=self.window.float(), return_complex=True)
		power = spectrum.abs().pow(2).transpose(1, 2)                    # (B, frames, bins)
		return torch.log(power @ self.filters.float() + 1e-6)           # (B, frames, mels)


class ConvSubsampling(nn.Module):
	def __init__(self, width):
		super().__init__()
		self.conv = nn.Sequential(nn.Conv2d(1, width, 3, 2), nn.ReLU(), nn.Conv2d(width, width, 3, 2), nn.ReLU())
		mels_out = ((MEL_BINS - 1) // 2 - 1) // 2
		self.project = nn.Linear(width * mels_out, width)

	def forward(self, features):
		x = self.conv(features.unsqueeze(1))                            # (B, C, frames/4, mels/4)
		batch, channels, frames, mels = x.shape
		return self.project(x.permute(0, 2, 1, 3).reshape(batch, frames, channels * mels))


class FeedForward(nn.Module):
	def __init__(self, width):
		super().__init__()
		self.net = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.SiLU(), nn.Dropout(0.1),
			nn.Linear(4 * width, width), nn.Dropout(0.1))

	def forward(self, x):
		return self.net(x)


class ConvModule(nn.Module):
	def __init__(self, width, kernel=31):
		super().__init__()
		self.norm = nn.LayerNorm(width)
		self.pointwise_in = nn.Conv1d(width, 2 * width, 1)
		self.depthwise = nn.Conv1d(width, width, kernel, padding=kernel // 2, groups=width)
		self.batch_norm = nn.BatchNorm1d(width)
		self.pointwise_out = nn.Conv1d(width, width, 1)
		self.dropout = nn.Dropout(0.1)

	def forward(self, x):
		y = self.norm(x).transpose(1, 2)                                # (B, C, T)
		y = F.glu(self.pointwise_in(y), dim=1)
		y = F.silu(self.batch_norm(self.depthwise(y)))
		return self.dropout(self.pointwise_out(y)).transpose(1, 2)


class ConformerBlock(nn.Module):
	def __init__(self, width, heads):
		super().__init__()
		self.ff1 = FeedForward(width)
		self.attention_norm = nn.LayerNorm(width)
		self.attention = nn.MultiheadAttention(width, heads, dropout=0.1, batch_first=True)
		self.conv = ConvModule(width)
		self.ff2 = FeedForward(width)
		self.final_norm = nn.LayerNorm(width)

	def forward(self, x):
		x = x + 0.5 * self.ff1(x)
		y = self.attention_norm(x)
		x = x + self.attention(y, y, y, need_weights=False)[0]
		x = x + self.conv(x)
		x = x + 0.5 * self.ff2(x)
		return self.final_norm(x)


class Conformer(nn.Module):
	def __init__(self, width, blocks, heads):
		super().__init__()
		self.front_end = LogMel()
		self.subsampling = ConvSubsampling(width)
		self.blocks = nn.ModuleList(ConformerBlock(width, heads) for _ in range(blocks))
		self.classifier = nn.Linear(width, VOCAB)

	def forward(self, waveform):
		x = self.subsampling(self.front_end(waveform))
		for block in self.blocks:
			x = block(x)
		return self.classifier(x).float().log_softmax(dim=-1)           # (B, T, vocab)


class Model(BenchmarkModel):
	task = SPEECH.RECOGNITION
	DESCRIPTION = "Conformer-S + CTC, log-mel front end, 2 s audio"
	DEFAULT_TRAIN_BSIZE = 8
	DEFAULT_EVAL_BSIZE = 8
	# The STFT front end needs float32 input; reduced precision goes through amp.
	SUPPORTED_PRECISIONS = ("fp32", "tf32", "amp")

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		width, blocks, heads, seconds = (64, 4, 4, 0.5) if self.small else (144, 16, 4, 2.0)
		self.model = Conformer(width, blocks, heads).to(self.device)
		samples = int(SAMPLE_RATE * seconds)
		self.example_inputs = (0.1 * torch.randn(self.batch_size, samples, device=self.device),)
		if test == "train":
			# CTC needs at least as many output frames as characters (and
			# one more per repeated character): keep transcripts at most
			# half the frames the subsampling leaves.
			stft_frames = samples // HOP + 1
			frames = ((stft_frames - 3) // 2 + 1 - 3) // 2 + 1
			length = min(TRANSCRIPT_LENGTH, frames // 2)
			self.transcripts = torch.randint(1, VOCAB, (self.batch_size, length), device=self.device)
			self.transcript_lengths = torch.full((self.batch_size,), length, dtype=torch.long)
			self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)

	def compute_loss(self, log_probs):
		frames = torch.full((log_probs.shape[0],), log_probs.shape[1], dtype=torch.long)
		return F.ctc_loss(log_probs.transpose(0, 1), self.transcripts, frames, self.transcript_lengths, blank=0)
