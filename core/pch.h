// Precompiled header: the heavy, stable includes every translation unit shares.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
