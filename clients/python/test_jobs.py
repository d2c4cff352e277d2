"""Tests of robustrl.jobs against a fake controller (http.server in a thread). Standard library only."""

import unittest
from typing import Any, Dict, List, Tuple

from fake_http import FakeServer, JsonHandler
from robustrl.jobs import JobStartError, main, start_job


class FakeController:
    def __init__(self) -> None:
        self.requests: List[Tuple[str, Dict[str, Any], Any]] = []
        self.answer: Tuple[int, Dict[str, Any]] = (202, {"accepted": True, "eventId": "e-1", "jobId": "job-42"})
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                fake.requests.append((self.path, self.read_json(), self.headers.get("Authorization")))
                self.answer(*fake.answer)

        self.http = FakeServer(Handler)
        self.url = self.http.url

    def close(self) -> None:
        self.http.close()


class StartJobTest(unittest.TestCase):
    def setUp(self) -> None:
        self.controller = FakeController()

    def tearDown(self) -> None:
        self.controller.close()

    def test_posts_the_announcement_with_its_token_and_the_job_id_as_one_path_segment(self) -> None:
        answer = start_job(self.controller.url, "team/job-42", trainers=2, rollouts=4, run_id="launch-1", detection={"agentSilentWindowSeconds": 30}, token="s3cret")
        self.assertEqual(answer["eventId"], "e-1")
        path, body, authorization = self.controller.requests[0]
        self.assertEqual(path, "/v1/jobs/team%2Fjob-42/start")
        self.assertEqual(
            body,
            {"mode": "semi-sync", "trainerMachines": 2, "rolloutMachines": 4, "resumedFromStep": None, "runId": "launch-1", "detection": {"agentSilentWindowSeconds": 30}},
        )
        self.assertEqual(authorization, "Bearer s3cret")

    def test_the_run_id_defaults_to_the_job_one_announcement_per_job(self) -> None:
        start_job(self.controller.url, "job-42", trainers=1)
        self.assertEqual(self.controller.requests[0][1]["runId"], "job-42")

    def test_a_refusal_carries_the_controllers_issues(self) -> None:
        self.controller.answer = (400, {"error": "invalid job start", "issues": [{"path": "trainerMachines", "message": "too small"}]})
        with self.assertRaises(JobStartError) as caught:
            start_job(self.controller.url, "job-42", trainers=-1)
        self.assertEqual(caught.exception.status, 400)
        self.assertIn("trainerMachines: too small", str(caught.exception))

    def test_an_unreachable_controller_and_bad_arguments(self) -> None:
        with self.assertRaises(JobStartError) as caught:
            start_job("http://127.0.0.1:9", "job-42", trainers=1, timeout=2)
        self.assertIsNone(caught.exception.status)
        with self.assertRaises(ValueError):
            start_job("controller:8082", "job-42", trainers=1)
        with self.assertRaises(ValueError):
            start_job(self.controller.url, "job-42", trainers=1, mode="fast")

    def test_the_command_line(self) -> None:
        code = main(["start", "--controller", self.controller.url, "--job", "job-42", "--trainers", "2", "--probe-timeout", "5", "--run-id", "r"])
        self.assertEqual(code, 0)
        self.assertEqual(self.controller.requests[0][1]["detection"], {"probeTimeoutSeconds": 5.0})


if __name__ == "__main__":
    unittest.main()
