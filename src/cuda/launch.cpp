#include "cuda/launch.h"

namespace imp::cuda {
namespace {
thread_local bool pdl_on = false;
}  // namespace

PdlScope::PdlScope() : previous_(pdl_on) { pdl_on = true; }
PdlScope::~PdlScope() { pdl_on = previous_; }
bool pdl_enabled() { return pdl_on; }

}  // namespace imp::cuda
