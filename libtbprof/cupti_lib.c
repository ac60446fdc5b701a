/*
 * Finding libcupti and choosing its API records (cupti_lib.h).  No state, no core: also built
 * into tests/cupti/conformance.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_lib.h"

static void *try_open(const char *file, char *path, size_t path_len)
{
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (h && path && path_len)
		snprintf(path, path_len, "%s", file);
	return h;
}

struct cudart_dir { char dir[4096]; };

/* dl_iterate_phdr callback: directory of the loaded libcudart.so.* */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct cudart_dir *out = arg;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	if (!base || strncmp(base + 1, "libcudart.so", 12) != 0)
		return 0;
	size_t len = (size_t)(base - name);
	if (len >= sizeof out->dir)
		return 0;
	memcpy(out->dir, name, len);
	out->dir[len] = 0;
	return 1;
}

void *tbp_cupti_open(const char *forced, char *path, size_t path_len)
{
	if (forced && *forced)
		return try_open(forced, path, path_len);

	void *h = dlopen(TBP_CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		/* Name the file: which copy the host loaded is what a user needs to know when it fails. */
		struct link_map *map = NULL;
		if (path && path_len) {
			if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
				snprintf(path, path_len, "%.4000s (already loaded)", map->l_name);
			else
				snprintf(path, path_len, "%s (already loaded)", TBP_CUPTI_SONAME);
		}
		return h;
	}

	struct cudart_dir cd = { { 0 } };
	if (dl_iterate_phdr(find_cudart, &cd)) {
		static const char *const rel[] = {
			"/" TBP_CUPTI_SONAME,                        /* nvidia/cu13/lib */
			"/../../cuda_cupti/lib/" TBP_CUPTI_SONAME,   /* nvidia/cuda_runtime/lib */
			"/../extras/CUPTI/lib64/" TBP_CUPTI_SONAME,  /* toolkit lib64 */
		};
		char file[4096];
		for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
			if (snprintf(file, sizeof file, "%s%s", cd.dir, rel[i]) >= (int)sizeof file)
				continue;
			if ((h = try_open(file, path, path_len)))
				return h;
		}
	}

	if ((h = try_open(TBP_CUPTI_SONAME, path, path_len)))
		return h;

	const char *roots[] = { getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda" };
	for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
		if (!roots[i] || !*roots[i])
			continue;
		char file[4096];
		if (snprintf(file, sizeof file, "%s/lib64/" TBP_CUPTI_SONAME, roots[i]) < (int)sizeof file &&
		    (h = try_open(file, path, path_len)))
			return h;
		if (snprintf(file, sizeof file, "%s/extras/CUPTI/lib64/" TBP_CUPTI_SONAME, roots[i]) <
			    (int)sizeof file &&
		    (h = try_open(file, path, path_len)))
			return h;
	}
	return NULL;
}

/* Name prefixes per domain (runtime, driver) and the join class they give. */
static const struct { const char *prefix; unsigned join_class; } join_prefixes[2][12] = {
	{
		{ "cudaLaunch", TBP_CAT_LAUNCH },            /* cudaLaunchKernel(_ptsz), ExC, Cooperative, ... */
		{ "__cudaLaunch", TBP_CAT_LAUNCH },          /* __cudaLaunchKernel: nvcc's <<<>>> */
		{ "cudaGraphLaunch", TBP_CAT_LAUNCH },       /* every kernel of the graph carries its id */
		{ "cudaMemcpy", TBP_CAT_MEMCPY },
		{ "cudaMemset", TBP_CAT_MEMSET },
		{ "cudaDeviceSynchronize", TBP_CAT_SYNC },
		{ "cudaStreamSynchronize", TBP_CAT_SYNC },
		{ "cudaEventSynchronize", TBP_CAT_SYNC },
		{ "cudaStreamWaitEvent", TBP_CAT_SYNC },
		{ "cudaThreadSynchronize", TBP_CAT_SYNC },
		{ NULL, 0 },
	},
	{
		{ "cuLaunch", TBP_CAT_LAUNCH },
		{ "cuGraphLaunch", TBP_CAT_LAUNCH },
		{ "cuMemcpy", TBP_CAT_MEMCPY },
		{ "cuMemset", TBP_CAT_MEMSET },
		{ "cuCtxSynchronize", TBP_CAT_SYNC },
		{ "cuStreamSynchronize", TBP_CAT_SYNC },
		{ "cuEventSynchronize", TBP_CAT_SYNC },
		{ "cuStreamWaitEvent", TBP_CAT_SYNC },
		{ NULL, 0 },
	},
};

unsigned tbp_cupti_join_class(int driver, const char *name)
{
	if (!name)
		return 0;
	for (unsigned i = 0; join_prefixes[driver != 0][i].prefix; i++) {
		const char *p = join_prefixes[driver != 0][i].prefix;
		if (strncmp(name, p, strlen(p)) == 0)
			return join_prefixes[driver != 0][i].join_class;
	}
	return 0;
}
