// CAVIF: libavif's declarations, and its functions defined in lazy.c (written by
// scripts/generate-lazy-libraries.py), which open libavif at run time: the binary
// does not link it, so a job without AVIF maps neither it nor its AV1 codecs.
#ifndef CAVIF_H
#define CAVIF_H
#include <avif/avif.h>

/// Opens libavif (once per process; `IMAGELOADER_AVIF_LIBRARY` may name another file).
/// Returns 1 when every function RasterImage calls was found, else 0 with `*error`
/// saying why. No other function of this target may be called before it returned 1.
int cavif_load_library(const char **error);
#endif
