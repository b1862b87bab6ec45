// main4: the lab's fourth variant, one read/write lock PER STRING.
// Everything but the lock (parsing, sockets, threads, timing) is in common/.
#include "common/server.h"
#include "common/store_rwlock_per_slot.h"

int main(int argc, char** argv) { return kv::ServerMain<kv::RwLockPerSlotStore>(argc, argv); }
