// engine/furrball/sync.h: the engine's names for engine/common/sync.h (an
// annotated pthread Mutex, CondVar and Notification that ThreadSanitizer can
// see; that header says why not absl::Mutex).
#ifndef FURRBALLS_ENGINE_FURRBALL_SYNC_H_
#define FURRBALLS_ENGINE_FURRBALL_SYNC_H_

#include "engine/common/sync.h"

namespace furrballs {
namespace furrball_internal {

using ::furrballs::CondVar;
using ::furrballs::Mutex;
using ::furrballs::MutexLock;
using ::furrballs::Notification;

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_SYNC_H_
