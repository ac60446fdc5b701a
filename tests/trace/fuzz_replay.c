/* Replays a fuzz corpus through a fuzz target without libFuzzer, so the
 * corpus runs as an ordinary test with any compiler: every file under the
 * directories (or files) given is fed to LLVMFuzzerTestOneInput once. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tt_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	size_t size;
	uint8_t *data = tt_read_file(path, &size);
	if (!data) {
		fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
		return -1;
	}
	/* An exact-size copy, so ASan/valgrind see reads past the end. */
	uint8_t *exact = malloc(size ? size : 1);
	memcpy(exact, data, size);
	free(data);
	LLVMFuzzerTestOneInput(exact, size);
	free(exact);
	return 0;
}

int main(int argc, char **argv)
{
	size_t files = 0;
	int errors = 0;
	for (int i = 1; i < argc; i++) {
		struct stat sb;
		if (stat(argv[i], &sb) != 0) {
			fprintf(stderr, "fuzz_replay: %s: not found\n", argv[i]);
			errors++;
			continue;
		}
		if (!S_ISDIR(sb.st_mode)) {
			errors += run_file(argv[i]) != 0;
			files++;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, alphasort);
		for (int j = 0; j < n; j++) {
			if (names[j]->d_name[0] != '.') {
				char path[4096];
				snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
				errors += run_file(path) != 0;
				files++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("replayed %zu inputs, %d unreadable\n", files, errors);
	/* An empty corpus means the test is not testing anything. */
	return errors || files == 0 ? 1 : 0;
}
