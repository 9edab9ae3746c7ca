// The daemon's core holding an HTTP type: server_folders.cmake must refuse it.
#pragma once
#include <boost/beast/http/message.hpp>
