// unlocked_server: TEST-ONLY server with NO locking (tests/store_unlocked.h).
// Same command line and protocol as main1..main4. It exists so that the
// consistency checker and the stress tests can prove they catch a broken
// server; never use it for measurements.
#include "common/server.h"
#include "tests/store_unlocked.h"

int main(int argc, char** argv) { return kv::ServerMain<kv::UnlockedStore>(argc, argv); }
