// A store that reaches up into the HTTP layer: server_folders.cmake must refuse it.
#pragma once
#include "http/session.hpp"
