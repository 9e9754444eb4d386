// The naive subject with a broken d(sink): +P_sink D, the sign flipped.
#define NAIVE_BACKWARD_SINK_TERM(p_sink, d) ((p_sink) * (d))
#include "naive/naive_subject.cpp"
