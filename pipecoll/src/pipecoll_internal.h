/* Internal to pipecoll.c and preload.c. */
#ifndef PIPECOLL_INTERNAL_H
#define PIPECOLL_INTERNAL_H

/* The library calls MPI_*; the interposer's copy of it (compiled with PIPECOLL_USE_PMPI)
 * calls PMPI_* so its pipelined paths never go through any MPI_* wrapper, its own or a
 * profiler's. */
#ifdef PIPECOLL_USE_PMPI
#define PC_MPI(name) PMPI_##name
#else
#define PC_MPI(name) MPI_##name
#endif

#endif /* PIPECOLL_INTERNAL_H */
