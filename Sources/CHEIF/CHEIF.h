// CHEIF: libheif reports errors as returned structs, so no shim is needed; this
// header only makes it importable.
#ifndef CHEIF_H
#define CHEIF_H
#include <libheif/heif.h>
#endif
