// The classic lock families as strategies: each lock type of common/ in the
// three granularities of the lock table (one-NAME, NAME-per-slot,
// striped-NAME; store_lock_table.h's LockFamily). The lock types themselves,
// how each works and when it wins, are in their own headers, which the
// preload (profile/) uses as well.
//
// Thread safety: as the lock table.
#ifndef KV_COMMON_STORE_LOCK_FAMILIES_H_
#define KV_COMMON_STORE_LOCK_FAMILIES_H_

#include "common/bravo_rwlock.h"
#include "common/clh_lock.h"
#include "common/futex_mutex.h"
#include "common/mcs_lock.h"
#include "common/pflock.h"
#include "common/pthread_rwlock.h"
#include "common/store_lock_table.h"
#include "common/ticket_lock.h"
#include "common/ttas_backoff_lock.h"

namespace kv {

using TicketLocks = LockFamily<TicketLock, "ticketlock", "ticket lock (FIFO spinlock)">;
using TtasBackoffLocks =
    LockFamily<TtasBackoffLock, "ttas-backoff", "TTAS spinlock with exponential back-off">;
using McsLocks = LockFamily<McsLock, "mcs", "MCS queue lock (waiters spin on their own node)">;
using ClhLocks =
    LockFamily<ClhLock, "clh", "CLH queue lock (waiters spin on the predecessor's node)">;
using FutexMutexes =
    LockFamily<FutexMutex, "futex-mutex", "futex mutex of our own (Drepper's 0/1/2 mutex)">;
using PhaseFairRwLocks =
    LockFamily<PhaseFairRwLock, "pflock",
               "phase-fair ticket rwlock (PF-T: reads and writes alternate, neither starves)">;
using BravoRwLocks =
    LockFamily<BravoRwLock<PthreadRwLock>, "bravo",
               "BRAVO rwlock (a pthread rwlock with biased readers in a shared slot table)">;
// The same BRAVO over the phase-fair lock: what the preload swaps in as
// bravo-pflock, so that its microbenchmark and its swaps run one code.
using BravoPflockRwLocks =
    LockFamily<BravoRwLock<PhaseFairRwLock>, "bravo-pflock",
               "BRAVO over the phase-fair rwlock (biased readers in a shared slot table)">;

}  // namespace kv

#endif  // KV_COMMON_STORE_LOCK_FAMILIES_H_
