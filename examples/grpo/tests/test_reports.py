"""What a trainer rank tells its agent (reports.py): only with an agent, and once per machine."""

from robustrl_grpo.reports import NoReports, reports_for


def test_no_agent_no_reports() -> None:
    assert isinstance(reports_for({}), NoReports)


def test_the_first_rank_of_a_machine_reports_the_others_do_not() -> None:
    agent = {"ROBUSTRL_AGENT_URL": "http://127.0.0.1:1"}
    assert not isinstance(reports_for(agent), NoReports)
    assert not isinstance(reports_for({**agent, "LOCAL_RANK": "0"}), NoReports)
    assert isinstance(reports_for({**agent, "LOCAL_RANK": "1"}), NoReports)
