// Nothing to compile: the header declares libFuzzer's LLVMFuzzerRunDriver.
#include "CFuzzDriver.h"
