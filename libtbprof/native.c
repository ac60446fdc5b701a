/*
 * Native call stacks (TBPROF_NATIVE=1): raw return addresses from
 * libunwind's unw_backtrace, interned as a trie of TBP_K_NATIVE definitions
 * (id, pc, parent = caller's node), plus TBP_K_MODULE definitions from
 * dl_iterate_phdr so tbanalyze can symbolize offline.  Nothing is
 * symbolized in the traced process.
 */
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "tbp_config.h"

#if TBP_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>

struct native_node {
	uint64_t parent, pc, id;
};
static pthread_mutex_t native_lock = PTHREAD_MUTEX_INITIALIZER;
static struct native_node *nodes;
static size_t nodes_cap, nodes_used;
static uint64_t next_node_id = 1;
static unsigned long long modules_adds_seen = ~0ull;

static uint64_t node_hash(uint64_t parent, uint64_t pc)
{
	uint64_t h = parent * 0x9E3779B97F4A7C15ull ^ pc * 0xC2B2AE3D27D4EB4Full;
	return h ^ (h >> 29);
}

static bool nodes_grow(void)
{
	size_t ncap = nodes_cap ? nodes_cap * 2 : 4096;
	struct native_node *n = calloc(ncap, sizeof *n);
	if (!n)
		return false;
	for (size_t i = 0; i < nodes_cap; i++) {
		if (!nodes[i].id)
			continue;
		size_t j = node_hash(nodes[i].parent, nodes[i].pc) & (ncap - 1);
		while (n[j].id)
			j = (j + 1) & (ncap - 1);
		n[j] = nodes[i];
	}
	free(nodes);
	nodes = n;
	nodes_cap = ncap;
	return true;
}

static uint64_t node_intern(uint64_t parent, uint64_t pc)
{
	if (nodes_used * 2 >= nodes_cap && !nodes_grow())
		return 0;
	size_t i = node_hash(parent, pc) & (nodes_cap - 1);
	while (nodes[i].id) {
		if (nodes[i].parent == parent && nodes[i].pc == pc)
			return nodes[i].id;
		i = (i + 1) & (nodes_cap - 1);
	}
	nodes[i] = (struct native_node){ parent, pc, next_node_id++ };
	nodes_used++;
	struct tbp_record def = { .kind = TBP_K_NATIVE };
	def.u.native.id = nodes[i].id;
	def.u.native.pc = pc;
	def.u.native.parent = parent;
	tbp_emit_def(&def);
	return nodes[i].id;
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *name = info->dlpi_name;
	char exe[4096];
	if (!name || !*name) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = 0;
		name = exe;
	}
	uint64_t path = tbp_intern_string(name, strlen(name));
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		struct tbp_record def = { .kind = TBP_K_MODULE };
		def.u.module.start = info->dlpi_addr + ph->p_vaddr;
		def.u.module.end = def.u.module.start + ph->p_memsz;
		def.u.module.offset = ph->p_offset;
		def.u.module.path = path;
		tbp_emit_def(&def);
	}
	return 0;
}

static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/* Module maps are emitted again whenever objects were loaded since the last
 * time (dlpi_adds changes); the analyzer keeps the latest range per address. */
static void modules_refresh(void)
{
	unsigned long long adds = 0;
	dl_iterate_phdr(adds_cb, &adds);
	if (adds == modules_adds_seen)
		return;
	modules_adds_seen = adds;
	dl_iterate_phdr(module_cb, NULL);
}

uint64_t tbp_native_stack(unsigned skip)
{
	if (!tbp_cfg.native)
		return 0;
	void *pcs[130];
	unsigned depth = tbp_cfg.native_depth + skip + 1;
	if (depth > 130)
		depth = 130;
	int n = unw_backtrace(pcs, (int)depth);
	if (n <= (int)skip + 1)
		return 0;
	uint64_t parent = 0;
	pthread_mutex_lock(&native_lock);
	modules_refresh();
	/* Outermost frame first, so the trie shares common callers. */
	for (int i = n - 1; i >= (int)skip + 1; i--) {
		parent = node_intern(parent, (uint64_t)(uintptr_t)pcs[i]);
		if (!parent)
			break;
	}
	pthread_mutex_unlock(&native_lock);
	return parent;
}

/* Fork: the lock is taken before the core's definition locks (a stack is interned under it) and
 * released, or reset in the child, after them.  Lent to the lifecycle (lifecycle.c) at load. */
static void native_fork_prepare(void)
{
	pthread_mutex_lock(&native_lock);
}

static void native_fork_parent(void)
{
	pthread_mutex_unlock(&native_lock);
}

static void native_fork_child(void)
{
	pthread_mutex_init(&native_lock, NULL);
}

static const struct tbp_hook_ops native_ops = {
	.rank = TBP_RANK_NATIVE,
	.fork_prepare = native_fork_prepare,
	.fork_parent = native_fork_parent,
	.fork_child = native_fork_child,
};

__attribute__((constructor(102))) static void native_register(void)
{
	tbp_register_hook_ops(&native_ops);
}

#else

uint64_t tbp_native_stack(unsigned skip)
{
	(void)skip;
	return 0;
}

#endif
