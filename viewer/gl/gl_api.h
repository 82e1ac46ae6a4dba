// The OpenGL 3.3 core entry points, for viewer/gl/ only: Mesa's and NVIDIA's libGL export every
// core function, so prototypes are enough and no loader is needed.
#pragma once

#ifndef GL_GLEXT_PROTOTYPES
#define GL_GLEXT_PROTOTYPES 1
#endif
#include <GL/gl.h>
#include <GL/glext.h>
