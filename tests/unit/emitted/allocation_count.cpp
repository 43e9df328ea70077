// The counting operator new of this test executable (one per executable) and its reader.
#include "../counting_allocator.h"

long allocation_count() { return g_allocations.load(); }
