// main3: the lab's third variant, ONE read/write lock for the whole array.
// Everything but the lock (parsing, sockets, threads, timing) is in common/.
#include "common/server.h"
#include "common/store_one_rwlock.h"

int main(int argc, char** argv) { return kv::ServerMain<kv::OneRwLockStore>(argc, argv); }
