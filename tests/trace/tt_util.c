#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <zstd.h>

#include "tt_util.h"

uint64_t tt_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Field values that exercise the codec: zeros, repeats, +1 runs, small
 * numbers, and full-width values (delta wraps around 2^64). */
static uint64_t field_value(uint64_t *st, uint64_t prev)
{
	switch (tt_rand(st) % 8) {
	case 0: return 0;
	case 1: case 2: return prev;
	case 3: return prev + 1;
	case 4: return tt_rand(st) % 100;
	case 5: return tt_rand(st);
	case 6: return prev - (tt_rand(st) % 1000);
	default: return tt_rand(st) % 100000;
	}
}

void tt_random_trace(struct tt_trace *t, uint64_t seed, size_t n)
{
	uint64_t st = seed * 7919 + 1;
	memset(t, 0, sizeof *t);
	t->n = n;
	t->recs = calloc(n, sizeof *t->recs);
	t->stream_kind = calloc(n, 1);
	t->stream_id = calloc(n, sizeof *t->stream_id);
	t->flush_after = calloc(n, 1);
	t->chunk_break = calloc(n, 1);
	size_t blob_cap = n * 64 + 70000, blob_len = 0;
	t->blobs = malloc(blob_cap);
	unsigned kinds[TBP_K__MAX], nkinds = 0;
	for (unsigned k = 0; k < TBP_K__MAX; k++)
		if (tbp_kind_lookup(k))
			kinds[nkinds++] = k;
	uint64_t prev[TBP_K__MAX][TBP_MAX_FIELDS] = {{0}};
	uint64_t ts = tt_rand(&st) % 1000000000000ull;
	unsigned sk = TBP_STREAM_DEFS;
	uint64_t sid = 0;
	int big_blob_done = 0;
	for (size_t i = 0; i < n; i++) {
		if (tt_rand(&st) % 16 == 0) {
			sk = (unsigned)(tt_rand(&st) % 3);
			sid = sk == TBP_STREAM_DEFS ? 0 : sk == TBP_STREAM_GPU ? tt_rand(&st) % 4
				: tt_rand(&st) % 2 ? (uint32_t)tt_rand(&st) : 1000 + tt_rand(&st) % 3;
		}
		t->stream_kind[i] = (uint8_t)sk;
		t->stream_id[i] = sid;
		t->chunk_break[i] = tt_rand(&st) % 50 == 0;
		t->flush_after[i] = tt_rand(&st) % 200 == 0;
		struct tbp_record *r = &t->recs[i];
		unsigned k = kinds[tt_rand(&st) % nkinds];
		const struct tbp_kind_info *ki = tbp_kind_lookup(k);
		r->kind = (uint8_t)k;
		r->nfields = ki->nfields;
		ts += tt_rand(&st) % 4 == 0 ? tt_rand(&st) % 5000 : 0;
		r->ts = tt_rand(&st) % 50 == 0 ? tt_rand(&st) : ts;
		for (unsigned f = 0; f < ki->nfields; f++)
			prev[k][f] = r->u.v[f] = field_value(&st, prev[k][f]);
		if (ki->has_blob) {
			uint32_t len = (uint32_t)(tt_rand(&st) % 5 == 0 ? 0 : tt_rand(&st) % 64);
			if (!big_blob_done && tt_rand(&st) % 100 == 0) {
				len = 65000; /* one blob bigger than typical buffers */
				big_blob_done = 1;
			}
			if (blob_len + len > blob_cap)
				len = 0;
			for (uint32_t b = 0; b < len; b++)
				t->blobs[blob_len + b] = (uint8_t)tt_rand(&st);
			r->blob_len = len;
			r->blob_len = len;
			r->blob = (void *)(uintptr_t)blob_len; /* fixed up below: arena may not move, but keep offsets */
			blob_len += len;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (tbp_kind_lookup(t->recs[i].kind)->has_blob)
			t->recs[i].blob = t->blobs + (uintptr_t)t->recs[i].blob;
}

void tt_free_trace(struct tt_trace *t)
{
	free(t->recs);
	free(t->stream_kind);
	free(t->stream_id);
	free(t->flush_after);
	free(t->chunk_break);
	free(t->blobs);
	memset(t, 0, sizeof *t);
}

int tt_batch_writes;

int tt_write_trace(const struct tt_trace *t, int fd)
{
	struct tbp_writer *w;
	struct tbp_writer_opts opts = {.compression_level = 0, .features = TBP_FEAT_CUPTI | TBP_FEAT_PYTHON};
	int rc = tbp_writer_open_fd(&w, fd, &opts);
	if (rc != TBP_OK) {
		fprintf(stderr, "writer open: %s\n", tbp_error_name(rc));
		return -1;
	}
	int have_chunk = 0;
	unsigned sk = 0;
	uint64_t sid = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (!have_chunk || t->chunk_break[i] || sk != t->stream_kind[i] || sid != t->stream_id[i]) {
			sk = t->stream_kind[i];
			sid = t->stream_id[i];
			if (t->chunk_break[i] && have_chunk)
				tbp_writer_end_chunk(w);
			rc = tbp_writer_begin_chunk(w, sk, sid);
			have_chunk = 1;
			if (rc != TBP_OK)
				break;
		}
		if (tt_batch_writes) {
			/* Up to the next chunk change or flush, in one call. */
			size_t j = i + 1;
			while (j < t->n && !t->flush_after[j - 1] && !t->chunk_break[j] &&
			       t->stream_kind[j] == sk && t->stream_id[j] == sid)
				j++;
			rc = tbp_writer_add_batch(w, &t->recs[i], j - i);
			i = j - 1;
		} else {
			rc = tbp_writer_add(w, &t->recs[i]);
		}
		if (rc == TBP_OK && t->flush_after[i])
			rc = tbp_writer_flush(w);
		if (rc != TBP_OK)
			break;
	}
	int crc = tbp_writer_close(w);
	if (rc == TBP_OK)
		rc = crc;
	if (rc != TBP_OK) {
		fprintf(stderr, "writer: %s\n", tbp_error_name(rc));
		return -1;
	}
	return 0;
}

uint8_t *tt_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	*size = 0;
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *p = realloc(buf, cap * 2);
			if (!p) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = p;
			cap *= 2;
		}
	}
	fclose(f);
	*size = len;
	return buf;
}

int tt_write_file(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int ok = fwrite(data, 1, size, f) == size;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---------------------------------------------------------------- synth */

struct synth {
	struct tt_trace *t;
	size_t cap, blob_len, blob_cap;
	uint64_t st;
	unsigned sk;
	uint64_t sid;
	int new_chunk;
};

static struct tbp_record *synth_add(struct synth *s, unsigned kind, uint64_t ts)
{
	struct tt_trace *t = s->t;
	if (t->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		t->recs = realloc(t->recs, s->cap * sizeof *t->recs);
		t->stream_kind = realloc(t->stream_kind, s->cap);
		t->stream_id = realloc(t->stream_id, s->cap * sizeof *t->stream_id);
		t->flush_after = realloc(t->flush_after, s->cap);
		t->chunk_break = realloc(t->chunk_break, s->cap);
		if (!t->recs || !t->stream_kind || !t->stream_id || !t->flush_after || !t->chunk_break) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
	}
	size_t i = t->n++;
	struct tbp_record *r = &t->recs[i];
	memset(r, 0, sizeof *r);
	r->kind = (uint8_t)kind;
	r->nfields = tbp_kind_lookup(kind)->nfields;
	r->ts = ts;
	t->stream_kind[i] = (uint8_t)s->sk;
	t->stream_id[i] = s->sid;
	t->flush_after[i] = 0;
	t->chunk_break[i] = (uint8_t)s->new_chunk;
	s->new_chunk = 0;
	return r;
}

static void synth_stream(struct synth *s, unsigned sk, uint64_t sid)
{
	s->sk = sk;
	s->sid = sid;
	s->new_chunk = 1;
}

static uint64_t synth_string(struct synth *s, uint64_t id, const char *str)
{
	size_t len = strlen(str);
	if (s->blob_len + len > s->blob_cap) {
		fprintf(stderr, "synth: string arena full\n");
		exit(2);
	}
	memcpy(s->t->blobs + s->blob_len, str, len);
	struct tbp_record *r = synth_add(s, TBP_K_STRING, 0);
	r->u.string.id = id;
	r->blob = (void *)(uintptr_t)s->blob_len; /* offset; fixed up at the end */
	r->blob_len = (uint32_t)len;
	s->blob_len += len;
	return id;
}

static const char *const kernel_names[] = {
	"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
	"ampere_sgemm_128x64_tn",
	"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
	"void cunn_SoftMaxForward<4, float, float, float, cunn::SoftMaxForwardEpilogue>",
	"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::GeluCUDAKernelImpl>>",
	"void at::native::(anonymous namespace)::layer_norm_kernel<float>",
	"void at::native::unrolled_elementwise_kernel<at::native::MulFunctor<float>>",
	"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8",
};
#define NKERNELS (sizeof kernel_names / sizeof kernel_names[0])

void tt_synth_trace(struct tt_trace *t, const struct tt_synth_opts *o)
{
	memset(t, 0, sizeof *t);
	struct synth s = {.t = t, .st = o->seed * 1000003 + 17};
	s.blob_cap = 1 << 16;
	t->blobs = malloc(s.blob_cap);
	uint64_t t0 = 5000000000000ull; /* a plausible CLOCK_MONOTONIC */
	uint64_t sid = 1;

	/* Definitions. */
	synth_stream(&s, TBP_STREAM_DEFS, 0);
	uint64_t host = synth_string(&s, sid++, "node17");
	uint64_t cmd = synth_string(&s, sid++, "python train.py --model resnet50 --batch 64");
	uint64_t exe = synth_string(&s, sid++, "/usr/bin/python3.11");
	uint64_t cwd = synth_string(&s, sid++, "/work/project");
	struct tbp_record *r = synth_add(&s, TBP_K_PROCESS, t0);
	r->u.process = (struct tbp_process){.pid = 4242, .ppid = 4200, .host = host, .cmdline = cmd, .exe = exe,
		.realtime_ns = 1795000000123456789ull, .monotonic_ns = t0, .rank = 1, .world_size = 4,
		.local_rank = 1, .cwd = cwd};
	uint64_t tname_main = synth_string(&s, sid++, "MainThread");
	uint64_t tname_worker = synth_string(&s, sid++, "pt_autograd_0");
	for (unsigned th = 0; th < o->threads; th++) {
		r = synth_add(&s, TBP_K_THREAD, t0);
		r->u.thread.tid = 4242 + th;
		r->u.thread.name = th == 0 ? tname_main : tname_worker;
	}
	uint64_t dev_name = synth_string(&s, sid++, "Simulated GPU 0");
	r = synth_add(&s, TBP_K_DEVICE, t0);
	r->u.device = (struct tbp_device){.device = 0, .name = dev_name, .vendor = 3};
	r = synth_add(&s, TBP_K_CLOCK, t0);
	r->u.clock = (struct tbp_clock){.domain = 1, .device = 0, .offset_ns = (uint64_t)-1250, .uncertainty_ns = 350,
		.method = TBP_CLOCK_CUPTI_CALLBACK};
	uint64_t note = synth_string(&s, sid++, "Python call paths from CPython 3.11");
	r = synth_add(&s, TBP_K_NOTICE, t0);
	r->u.notice = (struct tbp_notice){.level = TBP_NOTE_INFO, .code = TBP_NOTICE_TEXT, .message = note};
	uint64_t kname[NKERNELS];
	for (size_t k = 0; k < NKERNELS; k++)
		kname[k] = synth_string(&s, sid++, kernel_names[k]);
	uint64_t file = synth_string(&s, sid++, "/work/project/model.py");
	uint64_t funcs[4] = {synth_string(&s, sid++, "forward"), synth_string(&s, sid++, "attention"),
		synth_string(&s, sid++, "mlp"), synth_string(&s, sid++, "train_step")};
	/* Frames 100..103, call paths 200..203 (train_step -> forward -> x). */
	for (unsigned f = 0; f < 4; f++) {
		r = synth_add(&s, TBP_K_PYFRAME, t0);
		r->u.pyframe = (struct tbp_pyframe){.id = 100 + f, .file = file, .function = funcs[f], .line = 10 + 17 * f};
	}
	r = synth_add(&s, TBP_K_CALLPATH, t0);
	r->u.callpath = (struct tbp_callpath){.id = 200, .frame = 103, .parent = 0};
	r = synth_add(&s, TBP_K_CALLPATH, t0);
	r->u.callpath = (struct tbp_callpath){.id = 201, .frame = 100, .parent = 200};
	r = synth_add(&s, TBP_K_CALLPATH, t0);
	r->u.callpath = (struct tbp_callpath){.id = 202, .frame = 101, .parent = 201};
	r = synth_add(&s, TBP_K_CALLPATH, t0);
	r->u.callpath = (struct tbp_callpath){.id = 203, .frame = 102, .parent = 201};
	uint64_t iter_label = synth_string(&s, sid++, "train");
	t->flush_after[t->n - 1] = 1;

	uint64_t corr = 1;
	uint64_t now = t0 + 1000000;
	uint64_t gpu_free_at = now;
	uint64_t ptr = 0x7f0000000000ull;
	for (unsigned it = 0; it < o->iterations; it++) {
		for (unsigned th = 0; th < o->threads; th++) {
			uint64_t tid = 4242 + th;
			uint64_t first_corr = corr;
			size_t iter_first = t->n;
			synth_stream(&s, TBP_STREAM_THREAD, tid);
			r = synth_add(&s, TBP_K_MARKER, now);
			r->u.marker = (struct tbp_marker){.marker_kind = TBP_MARK_ITER_BEGIN, .value = it, .label = iter_label};
			unsigned nl = o->launches_per_iter;
			uint64_t span_start = now;
			for (unsigned l = 0; l < nl; l++) {
				unsigned k = (l * 3 + th) % NKERNELS;
				now += 3000 + tt_rand(&s.st) % (o->jitter_ns ? o->jitter_ns : 2000);
				if (l % 16 == 5) {
					r = synth_add(&s, TBP_K_MEMCPY, now);
					r->u.memcpy = (struct tbp_memcpy){.end = now + 9000, .api = TBP_API_cudaMemcpyAsync,
						.corr = corr++, .callpath = 202, .stream = 7, .bytes = l % 32 == 5 ? 4 : 1 << 20,
						.copy_kind = TBP_COPY_H2D, .flags = TBP_COPYF_ASYNC | TBP_COPYF_PINNED,
						.src = 0x55550000, .dst = ptr};
					now += 9000;
					continue;
				}
				if (l % 64 == 9) {
					r = synth_add(&s, TBP_K_MALLOC, now);
					r->u.malloc = (struct tbp_malloc){.end = now + 20000, .api = TBP_API_cudaMalloc,
						.corr = corr++, .callpath = 203, .ptr = ptr, .bytes = 1 << 22};
					now += 20000;
					ptr += 1 << 22;
					continue;
				}
				r = synth_add(&s, TBP_K_LAUNCH, now);
				uint64_t dur = 2500 + tt_rand(&s.st) % (o->jitter_ns ? o->jitter_ns : 500);
				r->u.launch = (struct tbp_launch){.end = now + dur, .api = TBP_API_cudaLaunchKernel,
					.corr = corr++, .callpath = 202 + (l & 1), .stream = 7, .name = kname[k],
					.grid_x = 80 * (1 + k % 3), .grid_y = 1, .grid_z = 1, .block_x = 256, .block_y = 1,
					.block_z = 1, .shmem = k % 2 ? 0 : 4096};
				now += dur;
			}
			now += 1000;
			r = synth_add(&s, TBP_K_SYNC, now);
			uint64_t sync_end = (gpu_free_at > now ? gpu_free_at : now) + 60000;
			r->u.sync = (struct tbp_sync){.end = sync_end, .api = TBP_API_cudaStreamSynchronize,
				.corr = corr++, .callpath = 201, .stream = 7, .sync_kind = TBP_SYNC_STREAM, .handle = 7};
			r = synth_add(&s, TBP_K_PY_SPAN, span_start);
			r->u.py_span = (struct tbp_py_span){.end = sync_end, .callpath = 201};
			now = sync_end + 2000;
			r = synth_add(&s, TBP_K_MARKER, now);
			r->u.marker = (struct tbp_marker){.marker_kind = TBP_MARK_ITER_END, .value = it, .label = iter_label};
			now += 5000;
			if (!o->gpu)
				continue;
			/* GPU activity for this thread's calls, in stream order. */
			synth_stream(&s, TBP_STREAM_GPU, 0);
			uint64_t g = span_start + 8000;
			size_t iter_last = t->n;
			for (size_t i = iter_first; i < iter_last; i++) {
				/* A copy: synth_add may move t->recs. */
				const struct tbp_record cr = t->recs[i], *c = &cr;
				if (t->stream_kind[i] != TBP_STREAM_THREAD || t->stream_id[i] != tid)
					continue;
				if ((c->kind != TBP_K_LAUNCH && c->kind != TBP_K_MEMCPY) || c->u.call.corr < first_corr)
					continue;
				uint64_t start = g > c->ts + 4000 ? g : c->ts + 4000;
				if (c->kind == TBP_K_LAUNCH) {
					uint64_t dur = 1500 + tt_rand(&s.st) % (o->jitter_ns ? o->jitter_ns : 6000);
					r = synth_add(&s, TBP_K_GPU_KERNEL, start);
					r->u.gpu_kernel = (struct tbp_gpu_kernel){.end = start + dur, .device = 0, .context = 1,
						.stream = 7, .corr = c->u.launch.corr, .name = c->u.launch.name,
						.grid_x = c->u.launch.grid_x, .grid_y = 1, .grid_z = 1, .block_x = 256,
						.block_y = 1, .block_z = 1, .registers = 32, .static_shmem = 0,
						.dynamic_shmem = c->u.launch.shmem};
					g = start + dur + 800;
				} else {
					uint64_t dur = c->u.memcpy.bytes / 20;
					r = synth_add(&s, TBP_K_GPU_MEMCPY, start);
					r->u.gpu_memcpy = (struct tbp_gpu_memcpy){.end = start + dur, .device = 0, .context = 1,
						.stream = 7, .corr = c->u.memcpy.corr, .bytes = c->u.memcpy.bytes,
						.copy_kind = TBP_COPY_H2D, .src_kind = TBP_MEM_PINNED, .dst_kind = TBP_MEM_DEVICE};
					g = start + dur + 800;
				}
			}
			gpu_free_at = g;
		}
		/* The closing LOST/END records share the last iteration's frame. */
		int last = it + 1 == o->iterations;
		if (o->iters_per_frame && (it + 1) % o->iters_per_frame == 0 && !(last && o->end))
			t->flush_after[t->n - 1] = 1;
	}
	if (o->end) {
		synth_stream(&s, TBP_STREAM_THREAD, 4242);
		r = synth_add(&s, TBP_K_LOST, now);
		r->u.lost = (struct tbp_lost){.count = 3, .source = TBP_LOST_CUPTI, .since_ts = t0};
		synth_stream(&s, TBP_STREAM_DEFS, 0);
		uint64_t total = t->n + 1;
		r = synth_add(&s, TBP_K_END, now + 1000);
		r->u.end = (struct tbp_end){.records = total, .lost = 3};
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->recs[i].kind == TBP_K_STRING)
			t->recs[i].blob = t->blobs + (uintptr_t)t->recs[i].blob;
}

/* ---------------------------------------------------------------- frames */

uint8_t *tt_trace_bytes(const struct tt_trace *t, size_t *size)
{
	char path[] = "/tmp/tbp-tt-XXXXXX";
	int fd = mkstemp(path);
	*size = 0;
	if (fd < 0)
		return NULL;
	uint8_t *data = NULL;
	if (tt_write_trace(t, fd) == 0)
		data = tt_read_file(path, size);
	unlink(path);
	return data;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tt_frames(const uint8_t *d, size_t n, struct tt_frame *out, size_t max)
{
	size_t off = 0;
	int count = 0;
	while (off < n) {
		if (n - off < 8)
			return -1;
		uint32_t magic = le32(d + off);
		struct tt_frame f = {.offset = off};
		if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) {
			f.size = 8 + (size_t)le32(d + off + 4);
			f.type = magic == 0x184D2A5Bu ? TT_FRAME_HEADER : magic == 0x184D2A5Cu ? TT_FRAME_SEEK
				: TT_FRAME_SKIPPABLE;
		} else {
			size_t fs = ZSTD_findFrameCompressedSize(d + off, n - off);
			if (ZSTD_isError(fs))
				return -1;
			f.size = fs;
			f.type = TT_FRAME_DATA;
		}
		if (f.size > n - off)
			return -1;
		if ((size_t)count < max)
			out[count] = f;
		count++;
		off += f.size;
	}
	return count;
}

uint8_t *tt_canonical(const uint8_t *d, size_t n, size_t *out_len)
{
	struct tt_frame frames[4096];
	int nf = tt_frames(d, n, frames, 4096);
	*out_len = 0;
	if (nf < 0 || nf > 4096)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	for (int i = 0; out && i < nf; i++) {
		const struct tt_frame *f = &frames[i];
		size_t need;
		if (f->type == TT_FRAME_SEEK)
			continue;
		if (f->type == TT_FRAME_DATA) {
			unsigned long long cs = ZSTD_getFrameContentSize(d + f->offset, f->size);
			if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN) {
				free(out);
				return NULL;
			}
			need = (size_t)cs;
		} else {
			need = f->size;
		}
		while (cap - len < need) {
			cap *= 2;
			uint8_t *p = realloc(out, cap);
			if (!p) {
				free(out);
				return NULL;
			}
			out = p;
		}
		if (f->type == TT_FRAME_DATA) {
			size_t got = ZSTD_decompress(out + len, need, d + f->offset, f->size);
			if (ZSTD_isError(got) || got != need) {
				free(out);
				return NULL;
			}
		} else {
			memcpy(out + len, d + f->offset, need);
		}
		len += need;
	}
	*out_len = len;
	return out;
}
