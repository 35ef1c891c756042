// One table that classifies every I/O call ppios-cc knows (POSIX, stdio, MPI-IO), in the
// spirit of clang-tidy's MPIFunctionClassifier: the rest of the transformer asks the table
// what a call is and where its arguments are, never compares names itself.
#ifndef PPIOS_TRANSFORMER_IOCALLTABLE_H
#define PPIOS_TRANSFORMER_IOCALLTABLE_H

#include "llvm/ADT/StringRef.h"

namespace clang {
class CallExpr;
}

namespace ppios {

enum class IoKind { Open, Close, Read, Write, Seek, Query, Finalize };
enum class IoInterface { Posix, Stdio, MpiIo, Mpi };

// What the prefetch thread does with a call of this function.
enum class PtAction {
  Prefetch,   // ppios_prefetch_<name>(args without buffer/status, seq, flags, site)
  RenamePt,   // ppios_pt_<name>(same args minus dropped ones)
  Keep,       // the PT's own handle: the plain call is fine (lseek, fseek, ftell, rewind)
  CountOnly,  // a transfer the PT must count but not perform (writes)
  None,       // never appears in the PT (MPI_Finalize)
};

struct IoCallInfo {
  const char *Name;
  IoKind Kind;
  IoInterface Interface;
  PtAction Action;
  int HandleArg;      // descriptor / stream / MPI file argument, -1 if none
  int HandleIsOut;    // 1 when the handle is returned through a pointer argument (MPI_File_open)
  int BufferArg;      // data buffer (dropped in the PT), -1 if none
  int StatusArg;      // MPI_Status* (the PT's own gets the predicted outcome), -1 if none
  int PathArg;        // file name of an open, -1 if none
  int DropArgs[2];    // further arguments the PT version drops (communicator, info), -1 if none
  bool UsesPosition;  // depends on the handle's file position (read, fread, MPI_File_read)
  bool WriteModeArg;  // open: argument 1 (flags/mode/amode) tells whether it may write
  int OutArg;         // a result stored through a pointer (MPI_File_get_size's size), -1 if none
  bool Formatted = false; // fscanf: every argument after the format (HandleArg + 1) is a destination
};

class IoCallTable {
public:
  // The entry for a call of the named function, or nullptr if it is no I/O call we handle.
  static const IoCallInfo *lookup(llvm::StringRef Name);
  static const IoCallInfo *lookup(const clang::CallExpr *Call);
  // True for data transfers (reads and writes), which carry sequence numbers.
  static bool isTransfer(const IoCallInfo &Info) {
    return Info.Kind == IoKind::Read || Info.Kind == IoKind::Write;
  }
  // For a read the table does not handle (line-oriented stdio, non-blocking or split
  // MPI-IO, vectored and asynchronous POSIX reads): why ppios-cc leaves it alone, for its
  // remark; nullptr for any other function.
  static const char *unhandledReadReason(llvm::StringRef Name);
  // True for the arguments a read stores the file's data into: its buffer, the arguments
  // its PT call drops (getline's size), a formatted read's destinations. The PT never
  // passes the MT's memory there, and what they hold afterwards is data.
  static bool isDataDestination(const IoCallInfo &Info, unsigned Index) {
    if (Info.Kind != IoKind::Read)
      return false;
    const int I = static_cast<int>(Index);
    return I == Info.BufferArg || I == Info.DropArgs[0] || I == Info.DropArgs[1] ||
           (Info.Formatted && I > Info.HandleArg + 1);
  }
  // True if the MT's call becomes ppios_<name> (everything but MPI_File_get_size).
  static bool renamedInMainThread(const IoCallInfo &Info) {
    return !(Info.Kind == IoKind::Query && Info.Interface == IoInterface::MpiIo);
  }
};

} // namespace ppios

#endif
