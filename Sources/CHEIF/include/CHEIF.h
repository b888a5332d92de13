// CHEIF: libheif's declarations, and its functions defined in lazy.c (written by
// scripts/generate-lazy-libraries.py), which open libheif at run time: the binary
// does not link it, so a job without HEIF maps neither it nor its codecs.
#ifndef CHEIF_H
#define CHEIF_H
#include <libheif/heif.h>

/// Opens libheif (once per process; `IMAGELOADER_HEIF_LIBRARY` may name another file).
/// Returns 1 when every function RasterImage calls was found, else 0 with `*error`
/// saying why. No other function of this target may be called before it returned 1.
int cheif_load_library(const char **error);
#endif
