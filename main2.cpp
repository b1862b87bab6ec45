// main2: the lab's second variant, one mutex PER STRING.
// Everything but the lock (parsing, sockets, threads, timing) is in common/.
#include "common/server.h"
#include "common/store_mutex_per_slot.h"

int main(int argc, char** argv) { return kv::ServerMain<kv::MutexPerSlotStore>(argc, argv); }
