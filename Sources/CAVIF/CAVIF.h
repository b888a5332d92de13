// CAVIF: libavif reports errors by result codes, so no shim is needed; this header
// only makes it importable.
#ifndef CAVIF_H
#define CAVIF_H
#include <avif/avif.h>
#endif
