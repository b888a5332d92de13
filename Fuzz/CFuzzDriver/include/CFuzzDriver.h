// libFuzzer's driver entry point, for a Swift executable that brings its own main.
// Only built with -sanitize=fuzzer (IMAGELOADER_FUZZ=1), which links libFuzzer.
#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H
#include <stddef.h>
#include <stdint.h>

typedef int (*cfuzz_callback)(const uint8_t *data, size_t size);
int LLVMFuzzerRunDriver(int *argc, char ***argv, cfuzz_callback callback);

#endif
