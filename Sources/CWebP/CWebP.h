// CWebP: libwebp and libwebpdemux report errors by status codes, so no shim is
// needed; this header only makes them importable.
#ifndef CWEBP_H
#define CWEBP_H
#include <webp/decode.h>
#include <webp/demux.h>
#include <webp/encode.h>
#include <webp/mux.h>
#endif
