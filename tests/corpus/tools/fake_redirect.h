/* Force-included by fake_ppios_cc.py: sends the program's I/O calls to libppios's MT
 * calls (ppios_read, ...) without a prefetch thread. Only for testing the corpus driver
 * before ppios-cc exists; ppios-cc does the real transformation. */
#ifndef CORPUS_FAKE_REDIRECT_H
#define CORPUS_FAKE_REDIRECT_H

#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppios/ppios.h"

#define open(...) ppios_open(__VA_ARGS__)
#define close(fd) ppios_close(fd)
#define read(fd, buf, n) ppios_read(fd, buf, n)
#define pread(fd, buf, n, off) ppios_pread(fd, buf, n, off)
#define write(fd, buf, n) ppios_write(fd, buf, n)
#define pwrite(fd, buf, n, off) ppios_pwrite(fd, buf, n, off)
#define lseek(fd, off, whence) ppios_lseek(fd, off, whence)
#define fopen(path, mode) ppios_fopen(path, mode)
#define fclose(fp) ppios_fclose(fp)
#define fread(p, size, n, fp) ppios_fread(p, size, n, fp)
#define fwrite(p, size, n, fp) ppios_fwrite(p, size, n, fp)
#define fseek(fp, off, whence) ppios_fseek(fp, off, whence)
#define ftell(fp) ppios_ftell(fp)
#define rewind(fp) ppios_rewind(fp)
#define MPI_File_open(...) ppios_MPI_File_open(__VA_ARGS__)
#define MPI_File_close(fh) ppios_MPI_File_close(fh)
#define MPI_File_read(...) ppios_MPI_File_read(__VA_ARGS__)
#define MPI_File_read_at(...) ppios_MPI_File_read_at(__VA_ARGS__)
#define MPI_File_write(...) ppios_MPI_File_write(__VA_ARGS__)
#define MPI_File_write_at(...) ppios_MPI_File_write_at(__VA_ARGS__)
#define MPI_File_seek(...) ppios_MPI_File_seek(__VA_ARGS__)
#define MPI_Finalize() ppios_MPI_Finalize()

#endif
