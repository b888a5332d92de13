// CGIF: giflib reports errors by return codes, so no shim is needed; this header
// only makes gif_lib.h importable.
#ifndef CGIF_H
#define CGIF_H
#include <gif_lib.h>
#endif
