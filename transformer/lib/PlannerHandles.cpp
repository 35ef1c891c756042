// The planner's handle analysis: which variables are descriptors, streams or MPI files,
// which of them the PT cannot follow, and where the MT hands one over (see
// PrefetchPlanner.h).
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

std::vector<const HandoffPoint *> PrefetchPlanner::handoffsAt(const Unit &U) const {
  std::vector<const HandoffPoint *> Out;
  for (const HandoffPoint &H : Handoffs)
    if (H.At == &U)
      Out.push_back(&H);
  return Out;
}

const HandoffPoint *PrefetchPlanner::handoffAt(const Unit &U) const {
  for (const HandoffPoint &H : Handoffs)
    if (H.At == &U)
      return &H;
  return nullptr;
}

void PrefetchPlanner::collectHandles() {
  const ASTContext &Ctx = Units.function()->getASTContext();
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls) {
      if (Site.HandleField && Site.Info->Kind == IoKind::Write)
        WrittenFields.insert(Site.HandleField);
      if (!Site.Handle || Site.HandleField)
        continue;
      if (Site.Info->Kind == IoKind::Open) {
        HandleInterface[Site.Handle] = Site.Info->Interface;
        if (openMayWrite(Site.Call, *Site.Info, Ctx))
          WritableHandles.insert(Site.Handle);
      }
      if (Site.Info->Kind == IoKind::Write)
        WrittenHandles.insert(Site.Handle);
    }
    for (const clang::VarDecl *VD : U.BufferVars) {
      int &Last = LastBufferWrite.try_emplace(VD, U.TopIndex).first->second;
      Last = std::max(Last, U.TopIndex);
    }
  });
  // A clone reads through the descriptors its parameters bring (the caller passes its PT's).
  if (AsClone) {
    auto AddParam = [&](const VarDecl *VD, IoInterface Iface) {
      if (VD && isa<ParmVarDecl>(VD) && !HandleInterface.count(VD))
        HandleInterface[VD] = Iface;
    };
    Units.forEach([&](const Unit &U) {
      for (const IoCallSite &Site : U.IoCalls)
        if (Site.Info->Kind != IoKind::Open && !Site.HandleField)
          AddParam(Site.Handle, Site.Info->Interface);
      for (const CallExpr *Call : U.Calls)
        if (const CloneSummary *S = summaryOf(Call->getDirectCallee()))
          for (auto [Index, VD] : cloneHandleArgs(Call, *S))
            AddParam(VD, S->HandleInterfaces[Index]);
    });
  }
  // `int fd = open(...)`: the open's handle is the variable it initialises or is assigned
  // to (not the other variables of the statement: `int n = 0, fd = open(...)`).
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Open && !Site.Info->HandleIsOut)
        for (const VarDecl *VD : U.Defs)
          if ((VD->getType()->isIntegerType() || VD->getType()->isPointerType()) &&
              receivesResult(U.S, VD, Site.Call))
            HandleInterface[VD] = Site.Info->Interface;
  });
  // Global handles: every PT reference is to the PT's shadow (see TranslationUnitFacts).
  if (Facts)
    for (const auto &[G, Iface] : Facts->GlobalHandles)
      HandleInterface[G] = Iface;
  // main(): a variable the program reads, seeks or closes through is a handle too, however
  // it got its value (a helper's open, another file's): the PT reopens what the MT holds.
  if (!AsClone)
    Units.forEach([&](const Unit &U) {
      for (const IoCallSite &Site : U.IoCalls)
        if (Site.Handle && !Site.HandleField && Site.Info->Kind != IoKind::Open &&
            Site.Info->Interface != IoInterface::Mpi && !Site.Handle->hasGlobalStorage() &&
            !isa<ParmVarDecl>(Site.Handle) && !HandleInterface.count(Site.Handle))
          HandleInterface[Site.Handle] = Site.Info->Interface;
    });
}

// A statement both threads reach at most once and by the same path, so that the MT can
// hand over what it sets right after it: a top-level statement of main(), or one in the
// braces of ifs (no loop or switch around it) whose conditions the PT computes, and no
// label before it that a goto could jump back to (gotoMayRepeat). The handoff goes after
// the statement, inside the same braces. (A forward goto that skips it in the MT, on an
// error path, leaves the PT waiting at its take until the run ends: no prefetches, no
// harm.)
static bool reachedOnceAlike(const Unit &U) {
  if (U.UnitKind == Unit::Loop || (U.Parent && U.Parent->UnitKind != Unit::Block))
    return false;
  for (const Unit *P = U.Parent; P; P = P->Parent)
    if (P->UnitKind == Unit::Loop || P->UnitKind == Unit::Switch || P->Bad)
      return false;
  return true;
}

// Handles the PT cannot follow: set in its region by a statement it does not run (a
// helper's open, a copy from memory it cannot read), so its copy would be stale.
void PrefetchPlanner::collectUnsafeHandles() {
  UnsafeHandles.clear();
  Handoffs.clear();
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    if (U.TopIndex < Start || U.UnitKind == Unit::Block)
      continue;
    for (const VarDecl *VD : U.Defs) {
      if (!HandleInterface.count(VD) || UnsafeHandles.count(VD))
        continue;
      if (Units.declaringUnit(VD) == &U && !VD->getInit())
        continue; // `int fd;` declares, sets nothing
      // A statement of main() that runs once, setting a local handle: handed over.
      // So is a global handle a call of such a statement sets (init() opening it).
      // (`int fd = open(...)` alone in its declaration: the PT declares it with the take.)
      const auto *DS = dyn_cast<DeclStmt>(U.S);
      bool DeclaresOnlyIt = DS && DS->isSingleDecl() && DS->getSingleDecl() == VD;
      bool Local = VD->hasLocalStorage() && !isa<ParmVarDecl>(VD) && Units.declaringUnit(VD) &&
                   (Units.declaringUnit(VD) != &U || DeclaresOnlyIt);
      bool Global = Facts && Facts->isGlobalHandle(VD);
      // (Not when the statement also calls a clone: the take replaces the statement.)
      bool CallsClone = false;
      for (const CallExpr *Call : U.Calls)
        CallsClone |= summaryOf(Call->getDirectCallee()) != nullptr;
      if (!canExecuteInPt(U) && !AsClone && !gotoMayRepeat(U) && reachedOnceAlike(U) &&
          (Local || (Global && !CallsClone)) && !countTransfers(U)) {
        Handoffs.push_back({&U, VD, HandleInterface.find(VD)->second,
                            static_cast<unsigned>(Handoffs.size())});
        continue;
      }
      if (!canExecuteInPt(U)) {
        const SourceManager &SM = VD->getASTContext().getSourceManager();
        // Why the MT does not hand it over after that statement.
        std::string Where =
            AsClone ? (Global ? ", in '" + Units.function()->getNameAsString() +
                                    "' (the main thread hands a global over only after a "
                                    "statement of main())"
                              : std::string())
            : !reachedOnceAlike(U)
                ? ", inside a loop, a switch, an unbraced branch or a condition the prefetch "
                  "thread cannot compute (where the main thread cannot hand it over)"
            : gotoMayRepeat(U) ? " (a goto may jump back over it: no point to hand it over at)"
            : countTransfers(U) ? " (the statement also does I/O of its own)"
            : Global && CallsClone ? " (the statement also calls a function whose reads the "
                                     "prefetch thread pre-executes)"
                                   : std::string();
        UnsafeHandles[VD] = std::string(Global ? "its descriptor, global " : "its descriptor ") +
                            quoted(VD) + (Global ? ", is set at line " : " is set at line ") +
                            std::to_string(SM.getPresumedLineNumber(U.S->getBeginLoc())) +
                            " by a statement the prefetch thread does not run" +
                            (U.Bad && !Global ? " (it " + U.BadWhy + ")" : std::string()) +
                            Where;
      }
    }
  }
}

// A read through a struct field (`g.fd`, `r->fp`): the field must hold nothing but
// descriptors of its interface, and the struct must be the PT's own.
std::string PrefetchPlanner::fieldHandleProblem(const IoCallSite &Site, const Unit *At) {
  const FieldDecl *F = Site.HandleField;
  const VarDecl *B = Site.Handle;
  auto It = Facts ? Facts->HandleFields.find(F) : TranslationUnitFacts().HandleFields.end();
  if (!Facts || It == Facts->HandleFields.end() || It->second != Site.Info->Interface)
    return "its descriptor is field '" + F->getNameAsString() +
           "', which the program does not only set from opens";
  if (const std::string *Bad = badReason(B, At))
    return "its descriptor is a field of " + quoted(B) + ", which " + *Bad;
  if (B->getType()->isPointerType()) {
    if (!ptOwnedPointer(B))
      return "its descriptor is a field of a struct the prefetch thread does not own";
    if (isa<ParmVarDecl>(B))
      DerefParams.insert(B);
    return "";
  }
  if (B->hasGlobalStorage() || (AsClone && isa<ParmVarDecl>(B)))
    return "its descriptor is a field of " + quoted(B) + ", which the prefetch thread does not copy";
  return "";
}

} // namespace ppios
