/* The grader's own kit-style Lab 2 servers: what a one-server lab's `main` is timed against
 * (the concurrency check, the clock probe, the leaderboard). They are the kit-style server
 * the test fixtures are made of (kitserver.h, written from the kit's contract alone, the way
 * the lab asks a student to write it), so that a student's server is compared with a server
 * of the same shape, not with lockbench's own:
 *
 *   kitrefD n ip port      D, the lock design (-DDESIGN=D): 1 one mutex, 2 a mutex per
 *                          string, 3 one rwlock, 4 an rwlock per string
 *
 * Built by CMake beside liblockprof.so, and by the platform bundles' setup.sh with gcc. */
#define VARIANT DESIGN
#include "kitserver.h"
