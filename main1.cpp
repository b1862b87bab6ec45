// main1: the lab's first variant, ONE mutex protecting the whole array.
// Everything but the lock (parsing, sockets, threads, timing) is in common/.
#include "common/server.h"
#include "common/store_one_mutex.h"

int main(int argc, char** argv) { return kv::ServerMain<kv::OneMutexStore>(argc, argv); }
